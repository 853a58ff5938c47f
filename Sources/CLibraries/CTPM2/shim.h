#ifndef PORTAL_TOKEN_CTPM2_SHIM_H
#define PORTAL_TOKEN_CTPM2_SHIM_H

#include <tss2/tss2_esys.h>
#include <tss2/tss2_mu.h>
#include <tss2/tss2_tctildr.h>

/*
 * tpm2-tss (its ESAPI, marshalling and TCTI loader) is loaded with dlopen when a store file
 * sealed by the TPM is first opened or written, not linked: no other run maps it. The Swift side
 * resolves each function with dlsym and calls it through these wrappers, which take the resolved
 * address as `fn`.
 */

static inline TSS2_RC portal_tctildr_initialize(void *fn, const char *conf, TSS2_TCTI_CONTEXT **tcti) {
    return ((__typeof__(Tss2_TctiLdr_Initialize) *)fn)(conf, tcti);
}

static inline void portal_tctildr_finalize(void *fn, TSS2_TCTI_CONTEXT **tcti) {
    ((__typeof__(Tss2_TctiLdr_Finalize) *)fn)(tcti);
}

static inline TSS2_RC portal_esys_initialize(void *fn, ESYS_CONTEXT **context, TSS2_TCTI_CONTEXT *tcti) {
    return ((__typeof__(Esys_Initialize) *)fn)(context, tcti, NULL);
}

static inline void portal_esys_finalize(void *fn, ESYS_CONTEXT **context) {
    ((__typeof__(Esys_Finalize) *)fn)(context);
}

static inline TSS2_RC portal_esys_set_timeout(void *fn, ESYS_CONTEXT *context, int32_t milliseconds) {
    return ((__typeof__(Esys_SetTimeout) *)fn)(context, milliseconds);
}

static inline TSS2_RC portal_esys_create_primary(void *fn, ESYS_CONTEXT *context, const TPM2B_PUBLIC *template,
                                                 ESYS_TR *handle) {
    TPM2B_SENSITIVE_CREATE sensitive = {0};
    TPM2B_DATA outside = {0};
    TPML_PCR_SELECTION creation = {0};
    return ((__typeof__(Esys_CreatePrimary) *)fn)(context, ESYS_TR_RH_OWNER, ESYS_TR_PASSWORD, ESYS_TR_NONE,
                                                  ESYS_TR_NONE, &sensitive, template, &outside, &creation, handle,
                                                  NULL, NULL, NULL, NULL);
}

static inline TSS2_RC portal_esys_create(void *fn, ESYS_CONTEXT *context, ESYS_TR parent, ESYS_TR session,
                                         const TPM2B_SENSITIVE_CREATE *sensitive, const TPM2B_PUBLIC *template,
                                         TPM2B_PRIVATE **private_part, TPM2B_PUBLIC **public_part) {
    TPM2B_DATA outside = {0};
    TPML_PCR_SELECTION creation = {0};
    return ((__typeof__(Esys_Create) *)fn)(context, parent, ESYS_TR_PASSWORD, session, ESYS_TR_NONE, sensitive,
                                           template, &outside, &creation, private_part, public_part, NULL, NULL,
                                           NULL);
}

static inline TSS2_RC portal_esys_load(void *fn, ESYS_CONTEXT *context, ESYS_TR parent,
                                       const TPM2B_PRIVATE *private_part, const TPM2B_PUBLIC *public_part,
                                       ESYS_TR *handle) {
    return ((__typeof__(Esys_Load) *)fn)(context, parent, ESYS_TR_PASSWORD, ESYS_TR_NONE, ESYS_TR_NONE,
                                         private_part, public_part, handle);
}

static inline TSS2_RC portal_esys_unseal(void *fn, ESYS_CONTEXT *context, ESYS_TR object, ESYS_TR authorization,
                                         ESYS_TR session, TPM2B_SENSITIVE_DATA **data) {
    return ((__typeof__(Esys_Unseal) *)fn)(context, object, authorization, session, ESYS_TR_NONE, data);
}

static inline TSS2_RC portal_esys_flush_context(void *fn, ESYS_CONTEXT *context, ESYS_TR handle) {
    return ((__typeof__(Esys_FlushContext) *)fn)(context, handle);
}

static inline TSS2_RC portal_esys_start_auth_session(void *fn, ESYS_CONTEXT *context, ESYS_TR salt_key,
                                                     TPM2_SE type, const TPMT_SYM_DEF *symmetric,
                                                     ESYS_TR *session) {
    return ((__typeof__(Esys_StartAuthSession) *)fn)(context, salt_key, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE,
                                                     ESYS_TR_NONE, NULL, type, symmetric, TPM2_ALG_SHA256, session);
}

static inline TSS2_RC portal_esys_trsess_set_attributes(void *fn, ESYS_CONTEXT *context, ESYS_TR session,
                                                        TPMA_SESSION flags) {
    return ((__typeof__(Esys_TRSess_SetAttributes) *)fn)(context, session, flags, 0xff);
}

static inline TSS2_RC portal_esys_policy_pcr(void *fn, ESYS_CONTEXT *context, ESYS_TR session,
                                             const TPML_PCR_SELECTION *pcrs) {
    TPM2B_DIGEST empty = {0};
    return ((__typeof__(Esys_PolicyPCR) *)fn)(context, session, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE, &empty,
                                              pcrs);
}

static inline TSS2_RC portal_esys_policy_get_digest(void *fn, ESYS_CONTEXT *context, ESYS_TR session,
                                                    TPM2B_DIGEST **digest) {
    return ((__typeof__(Esys_PolicyGetDigest) *)fn)(context, session, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE,
                                                    digest);
}

static inline void portal_esys_free(void *fn, void *pointer) {
    ((__typeof__(Esys_Free) *)fn)(pointer);
}

static inline TSS2_RC portal_mu_public_marshal(void *fn, const TPM2B_PUBLIC *value, uint8_t *buffer, size_t size,
                                               size_t *offset) {
    return ((__typeof__(Tss2_MU_TPM2B_PUBLIC_Marshal) *)fn)(value, buffer, size, offset);
}

static inline TSS2_RC portal_mu_public_unmarshal(void *fn, const uint8_t *buffer, size_t size, size_t *offset,
                                                 TPM2B_PUBLIC *value) {
    return ((__typeof__(Tss2_MU_TPM2B_PUBLIC_Unmarshal) *)fn)(buffer, size, offset, value);
}

static inline TSS2_RC portal_mu_private_marshal(void *fn, const TPM2B_PRIVATE *value, uint8_t *buffer, size_t size,
                                                size_t *offset) {
    return ((__typeof__(Tss2_MU_TPM2B_PRIVATE_Marshal) *)fn)(value, buffer, size, offset);
}

static inline TSS2_RC portal_mu_private_unmarshal(void *fn, const uint8_t *buffer, size_t size, size_t *offset,
                                                  TPM2B_PRIVATE *value) {
    return ((__typeof__(Tss2_MU_TPM2B_PRIVATE_Unmarshal) *)fn)(buffer, size, offset, value);
}

#endif
