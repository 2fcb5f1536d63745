//go:build race

package racecheck

// raceFactor: under the race detector every round is several times
// slower, so a kit runs three times as long for as many rounds.
const raceFactor = 3
