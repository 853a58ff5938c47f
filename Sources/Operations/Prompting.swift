import PortalTokenCore

/// Whether a command may ask a person anything: the keyring's unlock prompt, the file store's
/// passphrase, a browser, a two-factor code or a token typed at the terminal (docs/settings.md,
/// "Non-interactive callers"). Asked only where such a prompt would be shown, so that a run
/// served from what is stored or cached never pays for the question.
extension Context {
    /// How long `git config` may take to say whether `credential.interactive` rules prompts out.
    package static let gitConfigTimeoutMilliseconds = 2000

    /// `promptPermission` for a store to ask just before it would prompt, and only then.
    package var askPromptPermission: () -> PromptPermission {
        { [weak self] in self?.promptPermission() ?? .noTerminal }
    }

    /// Nobody to ask without a terminal; else allowed, unless a setting rules prompts out.
    package func promptPermission() -> PromptPermission {
        guard streams.inputIsTerminal || streams.errorIsTerminal else { return .noTerminal }
        return promptsRuledOutBy().map { .ruledOut(by: $0) } ?? .allowed
    }

    /// The caller's setting that rules out every prompt, named as it was set, or nil; decided
    /// once per run. The environment is read first (`GIT_TERMINAL_PROMPT`, then git's `-c`
    /// settings in `GIT_CONFIG_PARAMETERS`); only when neither says so is git asked, once, for
    /// `credential.interactive` as it applies to this run's URL.
    package func promptsRuledOutBy() -> String? {
        if let decidedPromptRuling { return decidedPromptRuling }
        let ruling =
            PromptRules.terminalPromptRuling(environment) ?? PromptRules.commandLineRuling(environment)
            ?? gitConfigRuling()
        decidedPromptRuling = .some(ruling)
        if let ruling { trace("prompts: ruled out by \(ruling)") }
        return ruling
    }

    /// `git config --get-urlmatch credential.interactive URL`: the value git's configuration gives
    /// this URL, `credential.<url>.interactive` included, within a bound. No git, no answer in
    /// time, or no value: nothing rules prompts out.
    private func gitConfigRuling() -> String? {
        guard let url = promptURL ?? apiURLReadingNoStore() else { return nil }
        let result = services.programs.run(
            "git", ["config", "--get-urlmatch", PromptRules.interactiveKey, url],
            timeoutMilliseconds: Self.gitConfigTimeoutMilliseconds)
        guard result.status == 0 else { return nil }
        var value = Substring(result.output)
        if value.last == "\n" { value = value.dropLast() }
        // git prints an empty line both for `interactive` given without a value (true) and for an
        // empty one (false); the first is how a boolean is usually switched on, so empty allows.
        guard !value.isEmpty, PromptRules.interactiveValueRulesOut(String(value)) else { return nil }
        return "\(PromptRules.interactiveKey)=\(value)"
    }
}
