package kinesis_test

import (
	"go/ast"
	"go/build"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/watermill-kinesis/watermill-kinesis/"

// layers are the driver's packages, each with the packages of this module it may import. The
// compiler already refuses an import cycle; this table also refuses a shortcut that skips a
// layer's boundary, such as a reader importing the coordinator's package through a third one.
var layers = map[string][]string{
	"pkg/kinesis/internal/logs":            {},
	"pkg/kinesis/internal/wire/envelope":   {},
	"pkg/kinesis/internal/wire/kpl":        {},
	"pkg/kinesis/internal/wire/shardmap":   {},
	"pkg/kinesis/internal/wire/getrecords": {},
	"pkg/kinesis/internal/wire":            {"pkg/kinesis/internal/wire/kpl"},
	"pkg/kinesis/internal/awscall":         {},
	"pkg/kinesis/internal/shard": {"pkg/lease", "pkg/kinesis/internal/awscall",
		"pkg/kinesis/internal/logs", "pkg/kinesis/internal/wire", "pkg/kinesis/internal/wire/getrecords"},
	"pkg/kinesis/internal/group": {"pkg/lease", "pkg/kinesis/internal/awscall",
		"pkg/kinesis/internal/logs", "pkg/kinesis/internal/shard"},
}

// TestLayersImportDownward: every internal package imports only the layers below it, never
// pkg/kinesis, and every internal package is in the table.
func TestLayersImportDownward(t *testing.T) {
	var found []string
	err := filepath.WalkDir("internal", func(path string, d os.DirEntry, err error) error {
		if err != nil || !d.IsDir() || d.Name() == "testdata" {
			return err
		}
		pkg, err := build.ImportDir(path, 0)
		if _, ok := err.(*build.NoGoError); ok {
			return nil
		}
		if err != nil {
			return err
		}
		name := "pkg/kinesis/" + filepath.ToSlash(path)
		found = append(found, name)
		allowed, ok := layers[name]
		if !ok {
			t.Errorf("%s is not in the layers table: say what it may import", name)
			return nil
		}
		for _, imp := range pkg.Imports {
			own, ok := strings.CutPrefix(imp, module)
			if ok && !slices.Contains(allowed, own) {
				t.Errorf("%s imports %s, which its layer may not", name, own)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for name := range layers {
		if !slices.Contains(found, name) {
			t.Errorf("the layers table names %s, which does not exist", name)
		}
	}
}

// TestFilesStaySmall keeps the driver readable: no non-test file of pkg/kinesis (internal
// packages and memlog included) above 400 lines, no function above 80, and the public package's own
// non-test code at most 3,500 lines.
func TestFilesStaySmall(t *testing.T) {
	const maxFile, maxFunc, maxPublic = 400, 80, 3500
	public := 0
	fset := token.NewFileSet()
	err := filepath.WalkDir(".", func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		lines := strings.Count(string(src), "\n")
		if lines > maxFile {
			t.Errorf("%s has %d lines; split it by concept (at most %d)", path, lines, maxFile)
		}
		if filepath.Dir(path) == "." {
			public += lines
		}
		f, err := parser.ParseFile(fset, path, src, 0)
		if err != nil {
			return err
		}
		for _, decl := range f.Decls {
			if fn, ok := decl.(*ast.FuncDecl); ok {
				if n := fset.Position(fn.End()).Line - fset.Position(fn.Pos()).Line + 1; n > maxFunc {
					t.Errorf("%s: %s has %d lines (at most %d)", path, fn.Name.Name, n, maxFunc)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if public > maxPublic {
		t.Errorf("pkg/kinesis's own non-test code is %d lines; the public face should hold at most %d", public, maxPublic)
	}
}
