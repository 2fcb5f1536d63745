//go:build !race

package racecheck

// raceFactor is 1 without the race detector (see race_on.go).
const raceFactor = 1
