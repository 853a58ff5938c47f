/// git's "did you mean": the closest known name by edit distance (transpositions count as one),
/// offered only when it is close.
package enum Suggestion {
    package static func nearest(to word: String, among candidates: [String]) -> String? {
        let target = Array(word.lowercased())
        var best: (name: String, distance: Int)?
        for candidate in Set(candidates).sorted() {
            let distance = editDistance(target, Array(candidate.lowercased()))
            if distance < (best?.distance ?? Int.max) { best = (candidate, distance) }
        }
        guard let best else { return nil }
        let stem = target.drop { $0 == "-" }.count
        let allowed = stem <= 3 ? 1 : stem <= 6 ? 2 : 3
        if best.distance <= allowed { return best.name }
        // A prefix of exactly one name (`stat` for `status`) is also what the user meant.
        guard stem >= 2 else { return nil }
        let prefixed = Set(candidates.filter { $0.lowercased().hasPrefix(word.lowercased()) })
        return prefixed.count == 1 ? prefixed.first : nil
    }

    /// The hint line for an unknown name: "did you mean …?" when one is close, else the help.
    package static func hint(for word: String, among candidates: [String], command: String?) -> String {
        if let match = nearest(to: word, among: candidates) { return "did you mean '\(match)'?" }
        return command.map { "see 'portal-token \($0) --help'" } ?? "see 'portal-token --help'"
    }

    /// Whether a stray word may be echoed: a short plain word that cannot be a token, a code or
    /// an email address.
    package static func isShowable(_ word: String) -> Bool {
        word.count <= 32 && !word.isEmpty
            && word.allSatisfy { ($0.isLetter && $0.isASCII) || $0 == "-" || $0 == "_" || $0 == "." }
    }

    /// Optimal string alignment distance: insertions, deletions, substitutions and adjacent
    /// transpositions each cost one.
    package static func editDistance(_ a: [Character], _ b: [Character]) -> Int {
        if a.isEmpty { return b.count }
        if b.isEmpty { return a.count }
        var table = [[Int]](repeating: [Int](repeating: 0, count: b.count + 1), count: a.count + 1)
        for i in 0...a.count { table[i][0] = i }
        for j in 0...b.count { table[0][j] = j }
        for i in 1...a.count {
            for j in 1...b.count {
                let cost = a[i - 1] == b[j - 1] ? 0 : 1
                table[i][j] = min(table[i - 1][j] + 1, table[i][j - 1] + 1, table[i - 1][j - 1] + cost)
                if i > 1, j > 1, a[i - 1] == b[j - 2], a[i - 2] == b[j - 1] {
                    table[i][j] = min(table[i][j], table[i - 2][j - 2] + 1)
                }
            }
        }
        return table[a.count][b.count]
    }
}
