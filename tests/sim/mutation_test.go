package sim_test

import (
	"os"
	"os/exec"
	"regexp"
	"testing"
)

// The simulation must catch a taker that breaks the counter rule. Each mutant is a build of the
// coordinator with a tag (pkg/kinesis/internal/group/rule_mutant_*.go): mutant_takeearly counts
// every lease of another worker as expired at the first listing that shows it, mutant_takehalf
// times the rule with half of LeaseDuration, before the owner's stop point (0.8 ×
// LeaseDuration). Their seeds must break invariant 3 (two readers of one shard at once). Each
// runs in a child go test of this package, since a mutant is a build of its own; skipped with
// -short and inside the child.
func TestSimulationCatchesBrokenTakes(t *testing.T) {
	if testing.Short() || os.Getenv("SIM_MUTANT") != "" {
		t.Skip("builds and runs the simulation with mutant coordinators; skipped with -short")
	}
	summary := regexp.MustCompile(`sim: mix \w+: \d+ seeds ran, (\d+) failed.*`)
	broke3 := regexp.MustCompile(`broke invariants (\d,)*3\b`)
	for _, tc := range []struct{ tag, seeds string }{{"mutant_takeearly", "40"}, {"mutant_takehalf", "200"}} {
		t.Run(tc.tag, func(t *testing.T) {
			cmd := exec.CommandContext(t.Context(), "go", "test", "-tags="+tc.tag, "-count=1", "-run=^TestSimulation$", ".")
			cmd.Env = append(os.Environ(), "SIM_SEEDS="+tc.seeds, "SIM_BRIEF=1", "SIM_MUTANT=1", "SIM_SEED=", "SIM_MIX=")
			out, err := cmd.CombinedOutput()
			got := summary.Find(out)
			t.Logf("the mutant's run: %s", got)
			switch {
			case err == nil:
				t.Fatalf("with the mutant %s the simulation passed; it must fail:\n%s", tc.tag, out)
			case got == nil:
				t.Fatalf("the mutant's run failed without running the simulation: %v\n%s", err, out)
			case !broke3.Match(out):
				t.Fatalf("the mutant's run failed, but no seed broke invariant 3 (one reader per shard):\n%s", out)
			}
		})
	}
}
