//go:build !mutant_takeearly && !mutant_takehalf

package group

// mutant is "" in every build but those of the simulation's mutation tests (tests/sim,
// TestSimulationCatchesBrokenTakes), which build with a tag that breaks the counter rule to show
// that the simulation fails then (rule_mutant_*.go).
const mutant = ""
