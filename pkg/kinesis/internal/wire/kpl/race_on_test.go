//go:build race

package kpl_test

// raceEnabled is true when the race detector is on, which adds allocations of its own.
const raceEnabled = true
