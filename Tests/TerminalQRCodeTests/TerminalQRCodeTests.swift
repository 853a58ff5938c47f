import PortalTokenCore
import Testing
import TerminalQRCode

@Suite("terminal QR codes")
struct TerminalQRCodeTests {
    static let link = Secret("otpauth://totp/Portal:user?secret=GEZDGNBVGY3TQOJQGEZDGNBVGY3TQOJQ&issuer=Portal")

    @Test("a short text is a version 1 symbol (21 modules) inside a 4-module quiet zone")
    func version1() throws {
        let matrix = try TerminalQRCode.matrix(encoding: Secret("hello"))
        #expect(matrix.symbolSize == 21)
        #expect(matrix.quietZone == 4)
        #expect(matrix.size == 29)
    }

    @Test("a totpLink at level M needs version 5 (37 modules)")
    func totpLinkVersion() throws {
        // 80 bytes: in byte mode, level M holds 62 bytes in version 4 and 84 in version 5.
        #expect(Self.link.byteCount == 80)
        let matrix = try TerminalQRCode.matrix(encoding: Self.link)
        #expect(matrix.symbolSize == 37)
        #expect(matrix.size == 45)
    }

    @Test("the quiet zone is light all round and the finder patterns sit just inside it")
    func quietZoneAndFinders() throws {
        let matrix = try TerminalQRCode.matrix(encoding: Self.link)
        for index in 0..<matrix.size {
            for band in 0..<4 {
                #expect(!matrix.isDark(row: band, column: index))
                #expect(!matrix.isDark(row: matrix.size - 1 - band, column: index))
                #expect(!matrix.isDark(row: index, column: band))
                #expect(!matrix.isDark(row: index, column: matrix.size - 1 - band))
            }
        }
        // A finder pattern's outer ring is 7 dark modules; its centre 3×3 is dark too.
        let first = 4, last = matrix.size - 5
        for offset in 0..<7 {
            #expect(matrix.isDark(row: first, column: first + offset))
            #expect(matrix.isDark(row: first + offset, column: first))
            #expect(matrix.isDark(row: first, column: last - offset))
            #expect(matrix.isDark(row: last - offset, column: first))
        }
        #expect(!matrix.isDark(row: first + 1, column: first + 1))
        #expect(matrix.isDark(row: first + 3, column: first + 3))
    }

    @Test("two rows of modules make one line, each ending in a colour reset")
    func lines() throws {
        let matrix = try TerminalQRCode.matrix(encoding: Self.link)
        let text = TerminalQRCode.render(matrix).text
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false).dropLast()
        #expect(lines.count == (matrix.size + 1) / 2)
        for line in lines {
            #expect(line.hasPrefix("\u{1B}[30;47;107m"))
            #expect(line.hasSuffix("\u{1B}[0m"))
            let glyphs = line.dropFirst("\u{1B}[30;47;107m".count).dropLast("\u{1B}[0m".count)
            #expect(glyphs.count == matrix.size)
        }
        // The first two lines are quiet zone: blank.
        #expect(lines[0].contains { $0 == "█" || $0 == "▀" || $0 == "▄" } == false)
    }

    @Test("each glyph draws the dark modules of its two rows")
    func glyphs() throws {
        let matrix = try TerminalQRCode.matrix(encoding: Secret("hello"))
        let lines = TerminalQRCode.render(matrix, style: .darkOnLight).text.split(separator: "\n")
        for (lineIndex, line) in lines.enumerated() {
            for (column, glyph) in line.enumerated() {
                let top = matrix.isDark(row: 2 * lineIndex, column: column)
                let bottom = matrix.isDark(row: 2 * lineIndex + 1, column: column)
                let expected: Character = top ? (bottom ? "█" : "▀") : (bottom ? "▄" : " ")
                #expect(glyph == expected)
            }
        }
        let inverted = TerminalQRCode.render(matrix, style: .lightOnDark).text.split(separator: "\n")
        #expect(inverted.first?.allSatisfy { $0 == "█" } == true)
        #expect(inverted.count == lines.count)
    }

    @Test("the drawing holds only escape codes, half blocks, spaces and line feeds, never the text")
    func noText() throws {
        for style in [TerminalQRCode.Style.ansi, .darkOnLight, .lightOnDark] {
            let text = try TerminalQRCode.render(Self.link, style: style).text
            #expect(!text.contains("otpauth"))
            #expect(!text.contains("GEZDGNBV"))
            var rest = Substring(text)
            for escape in ["\u{1B}[30;47;107m", "\u{1B}[0m"] { rest = Substring(rest.replacing(escape, with: "")) }
            #expect(rest.allSatisfy { "▀▄█ \n".contains($0) })
        }
    }

    @Test("no rendering of a matrix or a drawing shows the modules")
    func redacted() throws {
        let matrix = try TerminalQRCode.matrix(encoding: Self.link)
        #expect(String(describing: matrix) == "QRMatrix(size: 45, modules: <redacted>)")
        #expect(String(describing: try TerminalQRCode.render(Self.link)) == "<redacted>")
    }

    @Test("a text too long for any QR code is refused without repeating it")
    func tooLong() {
        #expect(throws: QRCodeError.self) {
            try TerminalQRCode.matrix(encoding: Secret(String(repeating: "x", count: 4000)))
        }
    }
}
