//go:build !mutant_takeearly

package group

// takeEarly is false in every build but that of the simulation's mutation test
// (tests/sim, TestSimulationCatchesEarlyTakes), which builds with the tag mutant_takeearly to
// show that the simulation fails when a taker ignores the counter rule.
const takeEarly = false
