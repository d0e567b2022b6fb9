package main

import (
	"context"
	"fmt"
	"io"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/lease"
)

// migrate is -migrate: it moves the group's leases out of the single-partition layout of earlier
// versions, or with -dry-run prints what it would move and changes nothing.
func migrate(ctx context.Context, o options, awsCfg aws.Config, stdout, stderr io.Writer) int {
	dc := dynamoDBClient(o, awsCfg)
	oldPartition := o.stream + "|" + o.group
	if o.dryRun {
		olds, err := lease.DynamoDBOldLayoutLeases(ctx, dc, o.table, o.group, o.stream)
		if err != nil {
			fmt.Fprintf(stderr, "kinesis-leases: %s\n", explain(o, err))
			return exitError
		}
		fmt.Fprintf(stdout, "dry run: -migrate would write the layout marker into partition %q of table %q and move %d lease(s) of group %q on stream %q to the %d-partition layout:\n",
			oldPartition, o.table, len(olds), o.group, o.stream, lease.DynamoDBLeaseBuckets)
		for _, l := range olds {
			fmt.Fprintf(stdout, "  shard %s: owner %s, generation %d, counter %d, checkpoint %s\n",
				l.ShardID, orNone(l.Owner), l.Generation, l.Counter, orNone(l.Checkpoint))
		}
		fmt.Fprintln(stdout, "nothing was changed; stop every instance of the group before running -migrate without -dry-run")
		return exitOK
	}
	moved, err := lease.MigrateDynamoDBLayout(ctx, dc, o.table, o.group, o.stream)
	if err != nil {
		fmt.Fprintf(stderr, "kinesis-leases: moved %d lease(s) before: %s\n", moved, explain(o, err))
		return exitError
	}
	fmt.Fprintf(stdout, "moved %d lease(s) of group %q on stream %q in table %q from partition %q to the %d-partition layout\n",
		moved, o.group, o.stream, o.table, oldPartition, lease.DynamoDBLeaseBuckets)
	return exitOK
}

// orNone is s, or "none" for the empty string.
func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}
