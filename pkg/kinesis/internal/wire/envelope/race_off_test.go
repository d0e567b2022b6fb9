//go:build !race

package envelope_test

// raceEnabled is true when the race detector is on; see race_on_test.go.
const raceEnabled = false
