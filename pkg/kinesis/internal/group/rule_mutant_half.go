//go:build mutant_takehalf

package group

// mutant, in this build only, times the counter rule with half of LeaseDuration: a taker that
// takes before the owner's stop point (0.8 × LeaseDuration). See rule.go.
const mutant = "takehalf"
