// Command harlowdrain is B3's third baseline (tests/bench): it drains n records from a
// kinesalite stream with harlow/kinesis-consumer, a Go Kinesis consumer measured beside ours,
// and prints the CPU time (getrusage, user + system) and wall time the drain took, from the
// Scan's start to the n-th record, as JSON.
//
// It is a module of its own so that the peer's dependencies stay out of the driver's go.mod.
// tests/bench builds it and runs it once per measured pair; it is not part of the driver.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awskinesis "github.com/aws/aws-sdk-go-v2/service/kinesis"
	consumer "github.com/harlow/kinesis-consumer"
)

// cost is what the drain took, as B3 reads it.
type cost struct {
	CPUSeconds  float64 `json:"cpu_seconds"`
	WallSeconds float64 `json:"wall_seconds"`
	Records     int64   `json:"records"`
}

func main() {
	endpoint := flag.String("endpoint", "", "the Kinesis endpoint (kinesalite)")
	stream := flag.String("stream", "", "the stream to drain from TRIM_HORIZON")
	n := flag.Int64("n", 0, "how many records to read")
	interval := flag.Duration("scan-interval", time.Millisecond, "harlow's ScanInterval: the pause between two reads of a shard")
	timeout := flag.Duration("timeout", 2*time.Minute, "give up after this long")
	flag.Parse()
	if *endpoint == "" || *stream == "" || *n <= 0 {
		fmt.Fprintln(os.Stderr, "harlowdrain: -endpoint, -stream and -n (> 0) are required")
		os.Exit(2)
	}
	c, err := drain(*endpoint, *stream, *n, *interval, *timeout)
	if err != nil {
		fmt.Fprintln(os.Stderr, "harlowdrain:", err)
		os.Exit(1)
	}
	if err := json.NewEncoder(os.Stdout).Encode(c); err != nil {
		fmt.Fprintln(os.Stderr, "harlowdrain:", err)
		os.Exit(1)
	}
}

// drain reads every shard of stream with harlow's consumer (all shards, TRIM_HORIZON, up to
// 10,000 records a read) until n records were read, counting them and decoding nothing.
func drain(endpoint, stream string, n int64, interval, timeout time.Duration) (cost, error) {
	cfg := aws.Config{Region: "us-east-1", Credentials: credentials.NewStaticCredentialsProvider("x", "x", "")}
	client := awskinesis.NewFromConfig(cfg, func(o *awskinesis.Options) { o.BaseEndpoint = aws.String(endpoint) })
	c, err := consumer.New(stream, consumer.WithClient(client), consumer.WithShardIteratorType("TRIM_HORIZON"),
		consumer.WithScanInterval(interval), consumer.WithMaxRecords(10000))
	if err != nil {
		return cost{}, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var total atomic.Int64
	var result cost
	done := errors.New("drained")
	cpu0, err := cpuTime()
	if err != nil {
		return cost{}, err
	}
	start := time.Now()
	err = c.Scan(ctx, func(*consumer.Record) error {
		if total.Add(1) == n {
			cpu, err := cpuTime()
			if err != nil {
				return err
			}
			result = cost{CPUSeconds: (cpu - cpu0).Seconds(), WallSeconds: time.Since(start).Seconds(), Records: n}
			cancel()
			return done
		}
		return nil
	})
	if result.Records == n {
		return result, nil
	}
	if err == nil {
		err = ctx.Err()
	}
	return cost{}, fmt.Errorf("read %d of %d records: %w", total.Load(), n, err)
}

// cpuTime is the process's user + system CPU time so far.
func cpuTime() (time.Duration, error) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, fmt.Errorf("getrusage: %w", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), nil
}
