package envelope_test

import (
	"fmt"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis/internal/wire/envelope"
)

func Example() {
	const maxRecord = 1 << 20 // the Kinesis limit on a record's data
	uuid, metadata, payload := "8e0d", map[string]string{"name": "order_created"}, []byte(`{"id":1}`)

	if envelope.Size(uuid, metadata, payload) > maxRecord {
		fmt.Println("too large")
		return
	}
	record := envelope.Append(nil, uuid, metadata, payload)

	for _, data := range [][]byte{record, []byte(`{"from":"another producer"}`)} {
		if !envelope.IsEnvelope(data) {
			fmt.Printf("raw payload %s\n", data)
			continue
		}
		d, err := envelope.Decode(data)
		if err != nil {
			fmt.Println("poison record:", err)
			continue
		}
		fmt.Printf("uuid %s, metadata %v, payload %s\n", d.UUID, d.Metadata, d.Payload)
	}
	// Output:
	// uuid 8e0d, metadata map[name:order_created], payload {"id":1}
	// raw payload {"from":"another producer"}
}
