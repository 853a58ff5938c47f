import Testing

/// The suites that use libsecret inside the test process. They run one at a time: libsecret's
/// synchronous calls each spin a main context of their own, and two suites creating items from
/// two threads at once is not what any user's process does.
@Suite("libsecret in the test process", .serialized)
enum InProcessKeyringTests {}
