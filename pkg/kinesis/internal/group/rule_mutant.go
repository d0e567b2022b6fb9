//go:build mutant_takeearly

package group

// takeEarly, in this mutant build only, makes every lease of another worker count as expired
// at the first listing that shows it: a taker that ignores the counter rule. See rule.go.
const takeEarly = true
