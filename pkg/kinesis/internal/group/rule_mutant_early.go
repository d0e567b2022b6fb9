//go:build mutant_takeearly

package group

// mutant, in this build only, makes every lease of another worker count as expired at the first
// listing that shows it: a taker that ignores the counter rule. See rule.go.
const mutant = "takeearly"
