//go:build e2e && race

package main

// raceDetector is true in a build with the race detector, which slows
// the decoding of a 100,000-server plan about tenfold: the wall-clock
// latency tests run without it (.ci/run's latency step).
const raceDetector = true
