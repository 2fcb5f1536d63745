// Package fake holds deterministic, fault-injecting implementations of
// rebootkit's interfaces, for tests and simulations: a clock that only moves
// when told to, and a power controller whose state changes after a lag,
// whose soft shutdown may be slow or ignored, and whose calls fail on demand.
//
// They are not for production. They keep everything in memory, they model
// hardware only as far as the decision functions care, and their time is
// whatever the Clock says. Use them in your own property tests: every fake
// records what was done to it, so a test can check invariants after every
// step.
//
// All fakes are safe for concurrent use.
package fake
