import Foundation
import Glibc
import PortalTokenTestSupport
import Testing

/// Hosts sharing one Portal session through a three-node OpenBao cluster with Raft storage on
/// loopback (`contrib/testing/openbao-cluster.sh`), each host talking to a node of its own, with
/// a token that holds only the policy of contrib/vault/portal-token-policy.hcl. The processes
/// of a test share one user keyring, so the hosts here keep no session copy: every command reads
/// the cluster, as hosts on machines of their own would once their copies lapse.
///
/// The second test kills the leader; the first uses whichever nodes still run, so their order
/// does not matter.
@Suite("a fleet on a three-node Raft cluster", .serialized)
struct VaultClusterTests {
    /// `count` hosts, host `i` on the `i`-th live node (round robin), under `prefix`.
    static func hosts(
        _ portal: PortalHarness, _ cluster: OpenBaoCluster, prefix: String, count: Int, nodes: [Int]
    ) throws -> [[String: String]] {
        try VaultFleetTests.hosts(portal, count: count).enumerated().map { index, host in
            var host = host
            for (name, value) in cluster.environment(prefix: prefix, node: nodes[index % nodes.count]) {
                host[name] = value
            }
            host["PORTAL_TOKEN_VAULT_CACHE_SECONDS"] = "0"
            return host
        }
    }

    static func freshPrefix() -> String { "portal-token/cluster-\(UInt32.random(in: 0...UInt32.max))" }

    @Test("30 concurrent 401s on three hosts of three nodes run the hook exactly once")
    func unauthorizedAcrossTheCluster() throws {
        try OpenBaoCluster.exclusively { try unauthorizedAcrossTheClusterAlone() }
    }

    func unauthorizedAcrossTheClusterAlone() throws {
        let cluster = try OpenBaoCluster()
        let prefix = Self.freshPrefix()
        let portal = try PortalHarness(backend: .file, extraEnvironment: ["PORTAL_TOKEN_BACKEND": "vault"])
        let nodes = cluster.liveNodes
        let hosts = try Self.hosts(portal, cluster, prefix: prefix, count: 3, nodes: nodes)
        let adopted = try ProcessRunner.portalToken(
            ["store"], stdin: portal.portalOrigin + "username=user-1\npassword=token-dead\n", environment: hosts[0])
        #expect(adopted.exitCode == 0, "\(adopted.stderr)")
        // A standby serves reads from its own copy of the data, a moment behind the leader: each
        // host sees the adopted session once its node has it.
        for host in hosts {
            let deadline = ProcessRunner.monotonicSeconds() + 10
            var seen = try ProcessRunner.portalToken(["token"], environment: host)
            while seen.stdout != "token-dead\n", ProcessRunner.monotonicSeconds() < deadline {
                usleep(100_000)
                seen = try ProcessRunner.portalToken(["token"], environment: host)
            }
            #expect(seen.stdout == "token-dead\n", "\(seen.stderr)")
        }
        let processes = 30
        // Portal holds every answer until all requests are in, so every process sees the 401.
        let arrived = portal.server.holdUnauthorized(until: processes, seconds: 30)
        let next = Locked(0)
        let results = try concurrently(processes) { () throws -> ProcessResult in
            let index = next.update { value -> Int in
                defer { value += 1 }
                return value
            }
            return try ProcessRunner.portalToken(["refresh"], environment: hosts[index % hosts.count], timeout: 60)
        }
        #expect(arrived.value == processes)
        #expect(
            results.allSatisfy { $0.exitCode == 3 },
            "\(results.filter { $0.exitCode != 3 }.map { ($0.exitCode, $0.stderr) })")
        #expect(portal.hookRuns == ["unauthorized user-1 \(portal.environmentID)"])
        for host in hosts { #expect(try ProcessRunner.portalToken(["token"], environment: host).exitCode == 1) }
    }

    /// One `store` of the write loop: which credential, how it ended, when and how long it took.
    struct Write: Sendable {
        var host: Int
        var name: String
        var exitCode: Int32
        var startedAt: Double
        var duration: Double
        var stderr: String
    }

    @Test("killing the leader mid-run loses no acknowledged write; every write succeeds or exits 4 within the bound")
    func leaderKilledMidRun() throws {
        try OpenBaoCluster.exclusively { try leaderKilledMidRunAlone() }
    }

    func leaderKilledMidRunAlone() throws {
        let cluster = try OpenBaoCluster()
        let nodes = cluster.liveNodes
        try #require(nodes.count == 3, "the cluster must have all three nodes for this test")
        let leader = try #require(try cluster.leader(), "the cluster names no leader")
        let prefix = Self.freshPrefix()
        let portal = try PortalHarness(backend: .file, extraEnvironment: ["PORTAL_TOKEN_BACKEND": "vault"])
        // Bounds of their own: 3 s to connect, 6 s for a request and for waiting out a leader change.
        let hosts = try Self.hosts(portal, cluster, prefix: prefix, count: 3, nodes: nodes).map { host in
            host.merging(["PORTAL_TOKEN_HTTP_CONNECT_TIMEOUT_MS": "3000", "PORTAL_TOKEN_HTTP_TIMEOUT_MS": "6000"]) {
                $1
            }
        }
        let bound = 20.0
        let survivors = nodes.filter { $0 != leader }

        let writes = Locked<[Write]>([])
        let stop = Locked(false)
        let killedAt = Locked<Double?>(nil)
        // Two writers per host, each storing credentials of its own one after the other.
        let writers = 6
        let next = Locked(0)
        let finished = try concurrently(writers + 1) { () throws -> Int in
            let index = next.update { value -> Int in
                defer { value += 1 }
                return value
            }
            if index == writers {
                // The killer: once a few writes went through, the leader dies; the writers go on
                // until the cluster has had time to elect another and serve it.
                let deadline = ProcessRunner.monotonicSeconds() + 30
                while writes.value.filter({ $0.exitCode == 0 }).count < 12, ProcessRunner.monotonicSeconds() < deadline
                {
                    usleep(50_000)
                }
                cluster.kill(node: leader)
                killedAt.update { $0 = ProcessRunner.monotonicSeconds() }
                usleep(12_000_000)
                stop.update { $0 = true }
                return 0
            }
            let host = index % hosts.count
            var count = 0
            while !stop.value {
                let name = "w\(index)-\(count).cluster.example"
                count += 1
                let started = ProcessRunner.monotonicSeconds()
                let result = try ProcessRunner.portalToken(
                    ["store"], stdin: "protocol=https\nhost=\(name)\nusername=u\npassword=pw-\(name)\n",
                    environment: hosts[host], timeout: 60)
                writes.update {
                    $0.append(
                        Write(
                            host: host, name: name, exitCode: result.exitCode, startedAt: started,
                            duration: result.duration, stderr: result.stderr))
                }
            }
            return count
        }
        #expect(finished.count == writers + 1)
        let all = writes.value
        let killed = try #require(killedAt.value)

        // Every write succeeded or exited 4 (storage failure, nothing lost), within the bound.
        for write in all {
            #expect(
                write.exitCode == 0 || write.exitCode == 4,
                "store of \(write.name) on host \(write.host): exit \(write.exitCode): \(write.stderr)")
            #expect(write.duration < bound, "store of \(write.name) took \(write.duration) s")
        }
        // The hosts on the surviving nodes went on writing once a new leader was elected.
        let survivingHosts = Set(hosts.indices.filter { survivors.contains(nodes[$0 % nodes.count]) })
        let acknowledgedAfter = all.filter {
            $0.exitCode == 0 && $0.startedAt > killed && survivingHosts.contains($0.host)
        }
        #expect(!acknowledgedAfter.isEmpty, "no write went through a surviving node after the leader was killed")
        let onSurvivors = all.filter { survivingHosts.contains($0.host) }
        let slowest = String(format: "%.2f", all.map(\.duration).max() ?? 0)
        print(
            "leader killed mid-run: \(all.count) writes, slowest \(slowest) s; "
                + "hosts on surviving nodes: \(onSurvivors.filter { $0.exitCode == 0 }.count) acknowledged, "
                + "\(onSurvivors.filter { $0.exitCode == 4 }.count) exit 4; host on the killed node: "
                + "\(all.filter { !survivingHosts.contains($0.host) && $0.exitCode == 4 }.count) exit 4"
                + (onSurvivors.first { $0.exitCode == 4 }.map { "; the first on a surviving node: \($0.stderr)" } ?? "")
        )
        // A host on the dead node fails fast rather than hanging.
        for write in all where write.startedAt > killed + 0.5 && !survivingHosts.contains(write.host) {
            #expect(write.exitCode == 4)
        }

        // Every acknowledged write is there, read back through the new leader.
        let newLeader = try #require(try cluster.leader(), "no new leader was elected")
        #expect(newLeader != leader)
        let reader = hosts[0].merging(
            cluster.environment(prefix: prefix, node: newLeader).compactMapValues { $0 }
        ) { $1 }
        let acknowledged = all.filter { $0.exitCode == 0 }
        let listed = try ProcessRunner.portalToken(["list", "--format", "json"], environment: reader, timeout: 60)
        #expect(listed.exitCode == 0, "\(listed.stderr)")
        for write in acknowledged {
            #expect(listed.stdout.contains("\"\(write.name)\""), "\(write.name) was acknowledged but is gone")
        }
        let checks = Locked(0)
        let readBack = try concurrently(4) { () throws -> [String] in
            var lost: [String] = []
            while true {
                let index = checks.update { value -> Int in
                    defer { value += 1 }
                    return value
                }
                guard index < acknowledged.count else { return lost }
                let name = acknowledged[index].name
                let got = try ProcessRunner.portalToken(
                    ["get"], stdin: "protocol=https\nhost=\(name)\n", environment: reader, timeout: 60)
                if got.stdout != "username=u\npassword=pw-\(name)\n" { lost.append("\(name): \(got.stderr)") }
            }
        }
        #expect(readBack.flatMap { $0 }.isEmpty, "\(readBack.flatMap { $0 })")
    }
}
