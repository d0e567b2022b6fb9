package getrecords_test

import (
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/kinesis"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis/internal/wire/getrecords"
)

// BenchmarkDecode compares the SDK's deserializer and WithFastDecode on a 1000-record answer
// (~150-byte payloads, as in the B3 benchmark) through the same client and fake HTTP client, so
// both include the SDK's whole stack (signing, endpoint, retry classification); "Decode" is the
// decoder alone. ns/record is the figure to compare; allocs/op covers the whole answer.
func BenchmarkDecode(b *testing.B) {
	const records = 1000
	body := genBody(records, bodyOpts{encryption: true})
	for _, bc := range []struct {
		name string
		opts []func(*kinesis.Options)
	}{{"sdk", nil}, {"fast", []func(*kinesis.Options){getrecords.WithFastDecode}}} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(body)))
			a := ok200(body)
			for b.Loop() {
				out, err := call(a, bc.opts...)
				if err != nil || len(out.Records) != records {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*records), "ns/record")
		})
	}
	b.Run("Decode", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(body)))
		for b.Loop() {
			if _, err := getrecords.Decode(body); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*records), "ns/record")
	})
}
