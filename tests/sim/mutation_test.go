package sim_test

import (
	"os"
	"os/exec"
	"regexp"
	"testing"
)

// The simulation must catch a taker that ignores the counter rule: built with the tag
// mutant_takeearly, a worker counts every lease of another as expired at the first listing that
// shows it (pkg/kinesis/internal/group/rule_mutant.go), and the seeds must then break invariant
// 3 (two readers of one shard at once). Run in a child go test of this package, since the mutant
// is a build of its own; skipped with -short and inside that child.
func TestSimulationCatchesEarlyTakes(t *testing.T) {
	if testing.Short() || os.Getenv("SIM_MUTANT") != "" {
		t.Skip("builds and runs the simulation with a mutant coordinator; skipped with -short")
	}
	cmd := exec.CommandContext(t.Context(), "go", "test", "-tags=mutant_takeearly", "-count=1", "-run=^TestSimulation$", ".")
	cmd.Env = append(os.Environ(), "SIM_SEEDS=40", "SIM_BRIEF=1", "SIM_MUTANT=1", "SIM_SEED=", "SIM_MIX=")
	out, err := cmd.CombinedOutput()
	summary := regexp.MustCompile(`sim: mix \w+: \d+ seeds ran, (\d+) failed.*`).Find(out)
	t.Logf("the mutant's run: %s", summary)
	switch {
	case err == nil:
		t.Fatalf("with takers ignoring the counter rule the simulation passed; it must fail:\n%s", out)
	case summary == nil:
		t.Fatalf("the mutant's run failed without running the simulation: %v\n%s", err, out)
	case !regexp.MustCompile(`broke invariants [\d,]*3`).Match(out):
		t.Fatalf("the mutant's run failed, but no seed broke invariant 3 (one reader per shard):\n%s", out)
	}
}
