package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"time"
)

// B3's third baseline: harlow/kinesis-consumer v0.5.0, the Go peer that does least per record,
// drains the same stream in the same run, in a process of its own (tests/bench/harlowdrain, a
// module of its own, so that the peer's dependencies stay out of the driver's go.mod). It
// measures its own CPU (getrusage) from its Scan's start to the n-th record, as costMeter does
// here; its process start and the Go runtime's are not counted. Its go.mod asks for the AWS SDK
// versions the driver's go.mod has: the SDK's deserialiser is most of harlow's CPU, and the
// versions harlow itself asks for at least decode at half the speed, which is not harlow's
// doing (keep them in step when the driver's SDK moves).

// harlowScanInterval is harlow's pause between two reads of a shard: it has one interval for
// every read, so it gets the pacing ours and the plain loop use after a read that returned
// records. (Harlow goes on reading drained shards at that pace, as configured.)
const harlowScanInterval = b3MinReadPacing

// buildHarlowDrain builds tests/bench/harlowdrain into a temporary directory and returns the
// binary's path, and a function that removes it.
func buildHarlowDrain(ctx context.Context) (string, func(), error) {
	_, here, _, ok := runtime.Caller(0)
	if !ok {
		return "", nil, fmt.Errorf("cannot locate tests/bench")
	}
	dir, err := os.MkdirTemp("", "harlowdrain")
	if err != nil {
		return "", nil, err
	}
	bin := filepath.Join(dir, "harlowdrain")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, ".")
	cmd.Dir = filepath.Join(filepath.Dir(here), "harlowdrain")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		_ = os.RemoveAll(dir)
		return "", nil, fmt.Errorf("building tests/bench/harlowdrain: %w\n%s", err, out.String())
	}
	return bin, func() { _ = os.RemoveAll(dir) }, nil
}

// harlowDrain runs the peer's drain of n records from stream and returns what it reported.
func harlowDrain(ctx context.Context, bin, endpoint, stream string, n int) (drainCost, error) {
	cmd := exec.CommandContext(ctx, bin, "-endpoint", endpoint, "-stream", stream, "-n", strconv.Itoa(n),
		"-scan-interval", harlowScanInterval.String())
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return drainCost{}, fmt.Errorf("harlowdrain: %w: %s", err, stderr.String())
	}
	var got struct {
		CPUSeconds  float64 `json:"cpu_seconds"`
		WallSeconds float64 `json:"wall_seconds"`
		Records     int64   `json:"records"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &got); err != nil || got.Records != int64(n) {
		return drainCost{}, fmt.Errorf("harlowdrain printed %q (%v), want %d records", stdout.String(), err, n)
	}
	return drainCost{cpu: time.Duration(got.CPUSeconds * float64(time.Second)), wall: time.Duration(got.WallSeconds * float64(time.Second))}, nil
}
