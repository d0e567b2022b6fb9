package tests_test

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// The examples each carry the same backend.go (memlog, local servers or AWS), so that one
// directory can be copied on its own; this keeps the copies one file.
func TestExampleBackendsAreOneFile(t *testing.T) {
	paths, err := filepath.Glob(filepath.Join("..", "_examples", "*", "backend.go"))
	if err != nil || len(paths) < 2 {
		t.Fatalf("backend.go of the examples: %v (%v)", paths, err)
	}
	first, err := os.ReadFile(paths[0])
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range paths[1:] {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(b, first) {
			t.Errorf("%s differs from %s: change every example's backend.go alike", p, paths[0])
		}
	}
}
