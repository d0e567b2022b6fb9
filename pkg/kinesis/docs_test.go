package kinesis_test

// TestDocsLinks and TestDocsGoBlocks keep README.md and the pages of docs/ honest: their links
// lead somewhere, and their Go code compiles. (The configuration tables are checked against the
// code by TestDocsConfiguration, in readme_internal_test.go.)

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/scanner"
	"go/token"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"slices"
	"strings"
	"testing"
	"unicode"
)

// mdFile is one Markdown file: its path relative to the module's root, and its lines.
type mdFile struct {
	rel   string
	lines []string
}

// docFiles returns the module's root and its Markdown documentation: README.md and docs/*.md.
func docFiles(t *testing.T) (string, []mdFile) {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("the module's root is not two directories up: %v", err)
	}
	pages, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	var files []mdFile
	for _, path := range append([]string{filepath.Join(root, "README.md")}, pages...) {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, path)
		files = append(files, mdFile{rel: filepath.ToSlash(rel), lines: strings.Split(string(data), "\n")})
	}
	return root, files
}

// fenceRE matches the line that opens or closes a fenced code block.
var fenceRE = regexp.MustCompile("^(\\s*)(`{3,}|~{3,})\\s*([^`\\s]*)")

// codeBlock is one fenced code block: the line of its opening fence (1-based), its info
// string, and its lines with the fence's indentation removed.
type codeBlock struct {
	fenceLine int
	info      string
	lines     []string
}

// split returns the file's fenced code blocks, and its lines with the blocks' lines (fences
// included) blanked, so that line numbers stay as they are.
func (f mdFile) split() ([]codeBlock, []string) {
	var blocks []codeBlock
	prose := slices.Clone(f.lines)
	var open *codeBlock
	var fence, indent string
	for i, line := range f.lines {
		m := fenceRE.FindStringSubmatch(line)
		switch {
		case open == nil && m != nil:
			open = &codeBlock{fenceLine: i + 1, info: m[3]}
			fence, indent = m[2], m[1]
			prose[i] = ""
		case open != nil && m != nil && strings.HasPrefix(m[2], fence[:1]) && len(m[2]) >= len(fence) && strings.TrimSpace(line) == m[2]:
			blocks = append(blocks, *open)
			open = nil
			prose[i] = ""
		case open != nil:
			open.lines = append(open.lines, strings.TrimPrefix(line, indent))
			prose[i] = ""
		}
	}
	return blocks, prose
}

var (
	// codeSpanRE matches an inline code span, whose text is no link.
	codeSpanRE = regexp.MustCompile("`+[^`]*`+")
	// linkRE matches an inline link or image, [text](target "title"); group 1 is the target.
	linkRE = regexp.MustCompile(`!?\[[^\]]*\]\(\s*<?([^)\s>]*)>?(?:\s+"[^"]*")?\s*\)`)
	// linkDefRE matches a link reference definition, [name]: target; group 1 is the target.
	linkDefRE = regexp.MustCompile(`(?m)^ {0,3}\[[^\]]+\]:\s*<?([^\s>]+)>?`)
	// schemeRE matches a target with a URL scheme.
	schemeRE = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9+.-]*:`)
	// headingRE matches an ATX heading; group 1 is its text.
	headingRE = regexp.MustCompile(`^ {0,3}#{1,6}\s+(.*?)(?:\s+#+)?\s*$`)
)

// TestDocsLinks checks the links of README.md and docs/*.md. Every relative link,
// [text](target) or a [name]: target definition, outside code blocks and code spans, must
// point at a file or directory of the repository, relative to the Markdown file that holds it.
// Links with a scheme (http:, https:, mailto:) are not followed. A #fragment into a Markdown
// file must name one of its headings as GitHub makes their anchors (lower case; punctuation
// other than - and _ dropped; spaces turned into -; a repeated heading gets -1, -2, ...); a
// fragment alone points into the file that holds it.
func TestDocsLinks(t *testing.T) {
	root, files := docFiles(t)
	anchors := map[string]map[string]bool{} // by path relative to root
	for _, f := range files {
		anchors[f.rel] = f.anchors()
	}
	checked := 0
	for _, f := range files {
		_, prose := f.split()
		for i, line := range prose {
			prose[i] = codeSpanRE.ReplaceAllString(line, "")
		}
		text := strings.Join(prose, "\n")
		var found [][]int
		found = append(found, linkRE.FindAllStringSubmatchIndex(text, -1)...)
		found = append(found, linkDefRE.FindAllStringSubmatchIndex(text, -1)...)
		for _, m := range found {
			target := text[m[2]:m[3]]
			where := fmt.Sprintf("%s:%d", f.rel, 1+strings.Count(text[:m[0]], "\n"))
			if target == "" {
				t.Errorf("%s: a link with no target", where)
				continue
			}
			if schemeRE.MatchString(target) {
				if scheme := strings.ToLower(target[:strings.Index(target, ":")]); scheme != "http" && scheme != "https" && scheme != "mailto" {
					t.Errorf("%s: link %q has a scheme (%s) that no reader can follow", where, target, scheme)
				}
				continue
			}
			checked++
			pathPart, fragment, _ := strings.Cut(target, "#")
			pathPart, err := url.PathUnescape(pathPart)
			if err != nil {
				t.Errorf("%s: link %q: %v", where, target, err)
				continue
			}
			rel := f.rel
			if pathPart != "" {
				if strings.HasPrefix(pathPart, "/") {
					t.Errorf("%s: link %q starts with /; make it relative to %s", where, target, f.rel)
					continue
				}
				rel = filepath.ToSlash(filepath.Join(filepath.Dir(f.rel), pathPart))
				if rel == ".." || strings.HasPrefix(rel, "../") {
					t.Errorf("%s: link %q points outside the repository", where, target)
					continue
				}
				if _, err := os.Stat(filepath.Join(root, filepath.FromSlash(rel))); err != nil {
					t.Errorf("%s: link %q points at %s, which does not exist", where, target, rel)
					continue
				}
			}
			if fragment == "" || !strings.HasSuffix(rel, ".md") {
				continue
			}
			names, ok := anchors[rel]
			if !ok {
				data, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(rel)))
				if err != nil {
					t.Errorf("%s: link %q: %v", where, target, err)
					continue
				}
				names = mdFile{rel: rel, lines: strings.Split(string(data), "\n")}.anchors()
				anchors[rel] = names
			}
			if !names[fragment] {
				t.Errorf("%s: link %q: %s has no heading whose anchor is #%s", where, target, rel, fragment)
			}
		}
	}
	if checked == 0 {
		t.Error("no relative link found: the link extraction is broken")
	}
}

// anchors returns the anchors of the file's headings, as GitHub makes them.
func (f mdFile) anchors() map[string]bool {
	_, prose := f.split()
	names := map[string]bool{}
	seen := map[string]int{}
	for _, line := range prose {
		m := headingRE.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		slug := headingAnchor(m[1])
		if n := seen[slug]; n > 0 {
			names[fmt.Sprintf("%s-%d", slug, n)] = true
		} else {
			names[slug] = true
		}
		seen[slug]++
	}
	return names
}

// inlineLinkRE matches a link inside a heading, whose text alone makes the anchor.
var inlineLinkRE = regexp.MustCompile(`!?\[([^\]]*)\]\([^)]*\)`)

// headingAnchor is the anchor GitHub gives a heading: its text as shown (no link targets, no
// backticks or asterisks), in lower case, with every character other than a letter, a digit, a
// space, - or _ dropped, and spaces turned into -.
func headingAnchor(heading string) string {
	heading = inlineLinkRE.ReplaceAllString(heading, "$1")
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// snippetImports are the packages a Go fragment may name, by the name it uses.
var snippetImports = map[string]string{
	"wmkinesis":   "github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis",
	"memlog":      "github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis/memlog",
	"lease":       "github.com/watermill-kinesis/watermill-kinesis/pkg/lease",
	"kcl":         "github.com/watermill-kinesis/watermill-kinesis/pkg/lease/kcl",
	"watermill":   "github.com/ThreeDotsLabs/watermill",
	"message":     "github.com/ThreeDotsLabs/watermill/message",
	"middleware":  "github.com/ThreeDotsLabs/watermill/message/router/middleware",
	"aws":         "github.com/aws/aws-sdk-go-v2/aws",
	"config":      "github.com/aws/aws-sdk-go-v2/config",
	"credentials": "github.com/aws/aws-sdk-go-v2/credentials",
	"kinesis":     "github.com/aws/aws-sdk-go-v2/service/kinesis",
	"dynamodb":    "github.com/aws/aws-sdk-go-v2/service/dynamodb",
	"otel":        "go.opentelemetry.io/otel",
	"propagation": "go.opentelemetry.io/otel/propagation",
	"trace":       "go.opentelemetry.io/otel/trace",
	"context":     "context",
	"errors":      "errors",
	"fmt":         "fmt",
	"http":        "net/http",
	"log":         "log",
	"maps":        "maps",
	"os":          "os",
	"signal":      "os/signal",
	"slices":      "slices",
	"slog":        "log/slog",
	"strings":     "strings",
	"syscall":     "syscall",
	"time":        "time",
}

// snippetGivens declares, in every fragment's package, the variables a fragment may use
// without declaring them.
const snippetGivens = `package snippet

import (
	"context"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/aws/aws-sdk-go-v2/aws"
	"go.opentelemetry.io/otel/trace"

	wmkinesis "github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis"
)

var (
	ctx       context.Context
	awsCfg    aws.Config
	logger    watermill.LoggerAdapter
	sub       *wmkinesis.Subscriber
	publisher *wmkinesis.Publisher
	msg       *message.Message
	tracer    trace.Tracer
	client    wmkinesis.KinesisAPI
)
`

// TestDocsGoBlocks checks that the Go code of README.md and docs/*.md compiles: every fenced
// block whose info string is exactly "go". Code that is not meant to compile (output,
// pseudo-code) takes another info string: text, sh, ... The convention for Go blocks:
//
//   - A block whose first line that is not blank or a // comment starts with "package" is a
//     complete file: it compiles as it is, alone in a package of its own (a package main must
//     have its func main).
//   - Any other block is a fragment, compiled alone in a package of its own too. A fragment of
//     declarations only (types, funcs, vars, consts) is put at the top level of a file; a
//     fragment of statements is put in the body of a function, followed by `_ = name` for every
//     variable its statements declare at their top level, so that `sub, err := ...` needs no
//     use after it. A fragment that mixes the two must be written as a complete file.
//   - A fragment gets the imports of the packages it names, by the name it uses, from
//     snippetImports: wmkinesis is this driver; kinesis and dynamodb the AWS SDK's services;
//     config, credentials and aws the SDK's own packages; add to the table for a package it
//     does not know. It may use these variables without declaring them (snippetGivens): ctx
//     (context.Context), awsCfg (aws.Config), logger (watermill.LoggerAdapter), sub
//     (*wmkinesis.Subscriber), publisher (*wmkinesis.Publisher), msg (*message.Message), tracer
//     (trace.Tracer) and client (wmkinesis.KinesisAPI); or declare its own of the same name.
//
// The blocks are compiled by one `go build` run in the module, through an -overlay that places
// each block (a file written to a temporary directory) in a package of its own under
// _docsnippets/ at the module's root, a directory that does not exist: nothing is written into
// the source tree. //line directives make the compiler's errors name the Markdown file and the
// line. The go command is the one on PATH; without one the test is skipped.
func TestDocsGoBlocks(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH to compile the documentation's Go blocks with")
	}
	root, files := docFiles(t)
	tmp := t.TempDir()
	overlay := map[string]string{}
	var pkgs []string
	place := func(pkg, name, src string) {
		file := filepath.Join(tmp, strings.ReplaceAll(pkg, "/", "_")+"_"+name)
		if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		overlay[filepath.Join(root, filepath.FromSlash(pkg), name)] = file
	}
	for _, f := range files {
		blocks, _ := f.split()
		for _, b := range blocks {
			if b.info != "go" {
				continue
			}
			pkg := fmt.Sprintf("_docsnippets/b%03d", len(pkgs))
			src, err := snippetFile(b, filepath.Join(root, filepath.FromSlash(f.rel)))
			if err != nil {
				t.Errorf("%s:%v", f.rel, err) // file:line: what
				continue
			}
			place(pkg, "snippet.go", src)
			if !isCompleteFile(b.lines) {
				place(pkg, "givens.go", snippetGivens)
			}
			pkgs = append(pkgs, "./"+pkg)
		}
	}
	if len(pkgs) == 0 {
		t.Fatal("no ```go block found in README.md or docs/*.md: the block extraction is broken")
	}
	data, err := json.Marshal(map[string]any{"Replace": overlay})
	if err != nil {
		t.Fatal(err)
	}
	overlayFile := filepath.Join(tmp, "overlay.json")
	if err := os.WriteFile(overlayFile, data, 0o644); err != nil {
		t.Fatal(err)
	}
	// go build compiles several packages and writes nothing (with -o and a directory it would
	// build the main packages only); one package main alone would be written out but for -o.
	args := []string{"build", "-overlay", overlayFile}
	if len(pkgs) == 1 {
		args = append(args, "-o", os.DevNull)
	}
	if raceEnabled() { // the packages the blocks import are then in the build cache already
		args = append(args, "-race")
	}
	cmd := exec.Command(goTool, append(args, pkgs...)...)
	cmd.Dir = root
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		report := strings.ReplaceAll(out.String(), root+string(filepath.Separator), "")
		t.Errorf("the documentation's Go blocks do not compile (%v); positions are in the Markdown files:\n%s", err, report)
	}
}

// isCompleteFile reports whether a block is a complete Go file: its first line that is not
// blank or a // comment is its package clause.
func isCompleteFile(lines []string) bool {
	for _, line := range lines {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "//") {
			continue
		}
		return strings.HasPrefix(line, "package ")
	}
	return false
}

// fragmentError is a fragment that does not parse, at line of its Markdown file.
type fragmentError struct {
	line int
	err  error
}

func (e fragmentError) Error() string { return fmt.Sprintf("%d: %v", e.line, e.err) }

// snippetFile returns the Go file that a block compiles as, with //line directives that map
// its code back to path, the Markdown file.
func snippetFile(b codeBlock, path string) (string, error) {
	code := strings.Join(b.lines, "\n") + "\n"
	directive := fmt.Sprintf("//line %s:%d\n", path, b.fenceLine+1)
	if isCompleteFile(b.lines) {
		return directive + code, nil
	}
	fset := token.NewFileSet()
	var body string
	file, err := parser.ParseFile(fset, "", "package snippet\n"+code, 0)
	if err == nil { // declarations
		body = directive + code
	} else {
		wrapped := "package snippet\nfunc _() {\n" + code + "}\n"
		file, err = parser.ParseFile(fset, "", wrapped, 0)
		if err != nil {
			line := b.fenceLine + 1
			var list scanner.ErrorList
			if errors.As(err, &list) && len(list) > 0 {
				line += list[0].Pos.Line - 3 // the wrapped source has two lines before the code
				err = errors.New(list[0].Msg)
			}
			return "", fragmentError{line, fmt.Errorf("a Go fragment that is neither declarations nor statements (write it as a complete file, starting with package): %v", err)}
		}
		var uses []string
		for _, stmt := range file.Decls[0].(*ast.FuncDecl).Body.List {
			for _, name := range declaredNames(stmt) {
				uses = append(uses, "_ = "+name)
			}
		}
		body = "func _() {\n" + directive + code + strings.Join(uses, "\n") + "\n}\n"
	}
	var imports []string // name "path", for every package name the fragment leaves unresolved
	for _, id := range file.Unresolved {
		if path, ok := snippetImports[id.Name]; ok {
			if spec := fmt.Sprintf("%s %q", id.Name, path); !slices.Contains(imports, spec) {
				imports = append(imports, spec)
			}
		}
	}
	slices.Sort(imports)
	head := "package snippet\n\n"
	if len(imports) > 0 {
		head += "import (\n\t" + strings.Join(imports, "\n\t") + "\n)\n\n"
	}
	return head + body, nil
}

// declaredNames returns the variables a statement declares in the scope it is in.
func declaredNames(stmt ast.Stmt) []string {
	var names []string
	add := func(id *ast.Ident) {
		if id.Name != "_" {
			names = append(names, id.Name)
		}
	}
	switch s := stmt.(type) {
	case *ast.AssignStmt:
		if s.Tok == token.DEFINE {
			for _, lhs := range s.Lhs {
				if id, ok := lhs.(*ast.Ident); ok {
					add(id)
				}
			}
		}
	case *ast.DeclStmt:
		if gen, ok := s.Decl.(*ast.GenDecl); ok && gen.Tok == token.VAR {
			for _, spec := range gen.Specs {
				for _, id := range spec.(*ast.ValueSpec).Names {
					add(id)
				}
			}
		}
	}
	return names
}

// raceEnabled reports whether this test binary was built with -race.
func raceEnabled() bool {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return false
	}
	for _, s := range info.Settings {
		if s.Key == "-race" {
			return s.Value == "true"
		}
	}
	return false
}
