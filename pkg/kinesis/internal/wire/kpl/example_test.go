package kpl_test

import (
	"fmt"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis/internal/wire/kpl"
)

func Example() {
	// Publisher: pack records bound for the same shard until the next one does not fit.
	agg := kpl.NewAggregator(kpl.DefaultMaxSize)
	for _, payload := range []string{"first", "second", "third"} {
		if !agg.Add("order-42", "", []byte(payload)) {
			break // send agg.Build(), Reset, and add the payload again
		}
	}
	data := agg.Build()
	fmt.Printf("one Kinesis record, partition key %q, %d bytes, %d user records\n", agg.PartitionKey(), len(data), agg.Len())

	// Consumer: unpack aggregates, and deliver anything else as it is.
	for _, rec := range [][]byte{data, []byte("not aggregated")} {
		users, err := kpl.Deaggregate(rec)
		if err != nil {
			fmt.Printf("raw record %q\n", rec)
			continue
		}
		for _, u := range users {
			fmt.Printf("user record %d, partition key %q: %s\n", u.SubSequenceNumber, u.PartitionKey, u.Data)
		}
	}
	// Output:
	// one Kinesis record, partition key "order-42", 64 bytes, 3 user records
	// user record 0, partition key "order-42": first
	// user record 1, partition key "order-42": second
	// user record 2, partition key "order-42": third
	// raw record "not aggregated"
}
