// Command bench runs the project's benchmark rows and prints one markdown table of them, each
// row a ratio against a baseline measured in the same run, and writes the table, with a line
// describing the machine, to the -out file:
//
//	go run ./tests/bench -out BENCHMARKS.md            (make bench: with the emulators up)
//	go run ./tests/bench -rows B1,B2 -runs 3
//
// Rows on memlog run anywhere; B3 and B5 need kinesalite (the SDK's AWS_ENDPOINT_URL_KINESIS,
// set by scripts/with-emulators.sh), B10 kinesis-local (KINESIS_MOCK_ENDPOINT), and are marked
// skipped without them. A row that fails is marked
// failed with its error and the others still run.
package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"runtime/trace"
	"slices"
	"strings"
	"sync"
	"time"
)

// line is one row of the table.
type line struct {
	Row, Measure, Ours, Baseline, Ratio, Goal, Met string
}

// result is what a row reports: its table lines and notes on what each side counts.
type result struct {
	lines []line
	notes []string
}

// env is what every row may use.
type env struct {
	// kinesisEndpoint is kinesalite's address (AWS_ENDPOINT_URL_KINESIS); empty outside the
	// emulators. The rows pass it on explicitly, also to the harlow/kinesis-consumer process.
	kinesisEndpoint string
	// kinesisLocalEndpoint is kinesis-local's (KINESIS_MOCK_ENDPOINT), for enhanced fan-out.
	kinesisLocalEndpoint string
	// runs is -runs; 0 means each row's own default.
	runs int
	// cpuProfile is where B3 writes a CPU profile of one extra run of our subscriber.
	cpuProfile string
	// memProfile is the path prefix of B2's heap profiles (PREFIX.before, PREFIX.after).
	memProfile string
}

func (e *env) runsOr(def int) int {
	if e.runs > 0 {
		return e.runs
	}
	return def
}

// errSkipped marks a row that cannot run here; its message is the reason.
type errSkipped struct{ reason string }

func (e errSkipped) Error() string { return e.reason }

var errNeedsEmulators = errSkipped{"skipped (needs the emulators: make bench)"}

type rowSpec struct {
	id      string
	measure string // what the row measures, for a failed or skipped line
	timeout time.Duration
	run     func(ctx context.Context, e *env) (result, error)
}

// rows are the benchmark rows, each registered by its own file (b1.go, ...), run in id order.
var rows []rowSpec

func register(r rowSpec) {
	rows = append(rows, r)
	// By number, not by text: B10 after B9.
	slices.SortFunc(rows, func(a, b rowSpec) int {
		return cmp.Or(cmp.Compare(len(a.id), len(b.id)), strings.Compare(a.id, b.id))
	})
}

func main() {
	out := flag.String("out", "", "also write the machine line and the table to this file (markdown)")
	only := flag.String("rows", "", "comma-separated rows to run (default: all): "+rowIDs())
	runs := flag.Int("runs", 0, "repetitions for rows that repeat (B1: pairs, default 5; B3: pairs, default 5; B7: 200k drains each way, default 5)")
	cpuProfile := flag.String("b3cpuprofile", "", "write a CPU profile of extra B3 drains by our subscriber (after the measured ones) to this file")
	memProfile := flag.String("b2memprofile", "", "sample every allocation (MemProfileRate=1) and write B2's heap profiles before and after the measured drain to PREFIX.before and PREFIX.after")
	wholeProfile := flag.String("cpuprofile", "", "write a CPU profile of the whole run (every selected row) to this file")
	traceFile := flag.String("trace", "", "write an execution trace of the whole run (every selected row) to this file")
	flag.Parse()
	if err := startProfiles(*wholeProfile, *traceFile); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(2)
	}
	defer stopProfiles()
	if *memProfile != "" {
		runtime.MemProfileRate = 1
	}
	selected, err := selectRows(*only)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(2)
	}
	e := &env{kinesisEndpoint: os.Getenv("AWS_ENDPOINT_URL_KINESIS"), kinesisLocalEndpoint: os.Getenv("KINESIS_MOCK_ENDPOINT"), runs: *runs, cpuProfile: *cpuProfile, memProfile: *memProfile}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	started := time.Now()
	var lines []line
	var notes []string
	for _, r := range selected {
		fmt.Fprintf(os.Stderr, "bench: %s: %s ...\n", r.id, r.measure)
		t0 := time.Now()
		res := runRow(ctx, e, r)
		fmt.Fprintf(os.Stderr, "bench: %s done in %s\n", r.id, time.Since(t0).Round(time.Millisecond))
		lines = append(lines, res.lines...)
		for _, n := range res.notes {
			notes = append(notes, r.id+": "+n)
		}
	}
	doc := machineLine(started) + "\n\n" + table(lines)
	if len(notes) > 0 {
		doc += "\nNotes:\n\n"
		for _, n := range notes {
			doc += "- " + n + "\n"
		}
	}
	stopProfiles()
	fmt.Print(doc)
	if *out != "" {
		file := "# Benchmarks\n\nWritten by `make bench` (`go run ./tests/bench -out BENCHMARKS.md` with the emulators up). " +
			"Each ratio compares with a baseline measured in the same run on the same machine.\n\n" + doc
		if err := os.WriteFile(*out, []byte(file), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		fmt.Fprintf(os.Stderr, "bench: wrote %s (%s in all)\n", *out, time.Since(started).Round(time.Second))
	}
}

// runRow runs one row within its timeout; an error becomes a failed (or skipped) line.
func runRow(ctx context.Context, e *env, r rowSpec) result {
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	res, err := r.run(ctx, e)
	var skip errSkipped
	switch {
	case errors.As(err, &skip):
		return result{lines: []line{{Row: r.id, Measure: r.measure, Ours: "-", Baseline: "-", Ratio: "-", Goal: "-", Met: skip.reason}}}
	case err != nil:
		fmt.Fprintf(os.Stderr, "bench: %s failed: %v\n", r.id, err)
		msg := strings.ReplaceAll(err.Error(), "|", "/")
		res.lines = append(res.lines, line{Row: r.id, Measure: r.measure, Ours: "-", Baseline: "-", Ratio: "-", Goal: "-", Met: "failed: " + msg})
	}
	return res
}

func rowIDs() string {
	ids := make([]string, len(rows))
	for i, r := range rows {
		ids[i] = r.id
	}
	return strings.Join(ids, ",")
}

// selectRows picks the rows named in only (all when empty), in id order.
func selectRows(only string) ([]rowSpec, error) {
	if only == "" {
		return rows, nil
	}
	want := map[string]bool{}
	for _, id := range strings.Split(only, ",") {
		id = strings.ToUpper(strings.TrimSpace(id))
		if !slices.ContainsFunc(rows, func(r rowSpec) bool { return r.id == id }) {
			return nil, fmt.Errorf("unknown row %q (rows: %s)", id, rowIDs())
		}
		want[id] = true
	}
	var out []rowSpec
	for _, r := range rows {
		if want[r.id] {
			out = append(out, r)
		}
	}
	return out, nil
}

func table(lines []line) string {
	var b strings.Builder
	b.WriteString("| row | measure | ours | baseline | ratio | goal | met? |\n")
	b.WriteString("|---|---|---|---|---|---|---|\n")
	for _, l := range lines {
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s |\n", l.Row, l.Measure, l.Ours, l.Baseline, l.Ratio, l.Goal, l.Met)
	}
	return b.String()
}

func machineLine(at time.Time) string {
	return fmt.Sprintf("Machine: %s/%s, %d CPUs (runtime.NumCPU), %s, %s, %s, %s.",
		runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), cpuModel(), runtime.Version(), at.UTC().Format("2006-01-02 15:04 UTC"), loadAverage())
}

// loadAverage is the 1, 5 and 15 minute load averages at the start, from /proc/loadavg: on
// shared cores, what else ran shows in every absolute number (less in the ratios).
func loadAverage() string {
	data, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(data)); err == nil && len(f) >= 3 {
		return "load average " + strings.Join(f[:3], " ") + " at the start"
	}
	return "load average unknown"
}

// cpuModel is the first "model name" of /proc/cpuinfo, or "CPU model unknown".
func cpuModel() string {
	data, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return "CPU model unknown"
	}
	for _, l := range strings.Split(string(data), "\n") {
		if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "CPU model unknown"
}

// stopProfiles ends what startProfiles began; it is safe to call twice.
var stopProfiles = func() {}

// startProfiles starts a CPU profile and an execution trace of the whole run, each when its
// path is not empty.
func startProfiles(cpuPath, tracePath string) error {
	var stops []func()
	if cpuPath != "" {
		f, err := os.Create(cpuPath)
		if err != nil {
			return err
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			return errors.Join(err, f.Close())
		}
		stops = append(stops, func() { pprof.StopCPUProfile(); _ = f.Close() })
	}
	if tracePath != "" {
		f, err := os.Create(tracePath)
		if err != nil {
			return err
		}
		if err := trace.Start(f); err != nil {
			return errors.Join(err, f.Close())
		}
		stops = append(stops, func() { trace.Stop(); _ = f.Close() })
	}
	var once sync.Once
	stopProfiles = func() {
		once.Do(func() {
			for _, stop := range stops {
				stop()
			}
		})
	}
	return nil
}
