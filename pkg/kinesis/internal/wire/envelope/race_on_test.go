//go:build race

package envelope_test

// raceEnabled is true when the race detector is on. Its instrumentation defeats the compiler's
// fusion of append(s, make([]T, n)...) into one allocation, so exact allocation counts for
// growing a buffer only hold without it.
const raceEnabled = true
