# The policy a host using `portal-token --backend vault` needs, for the default mount (secret)
# and path prefix (portal-token): docs/storage.md, "Vault / OpenBao".
#   bao policy write portal-token contrib/vault/portal-token-policy.hcl
# Removing an item writes a tombstone version, so no "delete" capability is needed. For a
# read-only host (get and token only), keep "read" on data/ and "read", "list" on metadata/.
path "secret/data/portal-token/*" {
  capabilities = ["create", "read", "update"]
}

path "secret/metadata/portal-token/*" {
  capabilities = ["create", "read", "update", "list"]
}
