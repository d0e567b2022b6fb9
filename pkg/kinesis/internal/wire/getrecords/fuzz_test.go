package getrecords_test

import (
	"bytes"
	"errors"
	"regexp"
	"strconv"
	"testing"

	smithy "github.com/aws/smithy-go"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis/internal/wire/getrecords"
)

var offsetRE = regexp.MustCompile(` at offset (\d+)$`)

// FuzzDecode holds Decode to the SDK on any body: it never panics nor changes its input; when
// the SDK decodes a body, Decode decodes it to a deeply equal output; when the SDK refuses one
// (or panics on it: a "NaN" timestamp), Decode refuses it too, with a
// *smithy.DeserializationError whose offset lies within the body. Decode has no looseness to
// allow for: it accepts nothing the SDK refuses. The plain test runs the seeds only; run
// `go test -fuzz FuzzDecode -fuzztime 60s` to search.
func FuzzDecode(f *testing.F) {
	for _, body := range sameAsSDK() {
		if len(body) <= 4096 {
			f.Add([]byte(body))
		}
	}
	for _, tc := range refused {
		if len(tc.body) <= 4096 {
			f.Add([]byte(tc.body))
		}
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		orig := bytes.Clone(body)
		fast, err := getrecords.Decode(body)
		if !bytes.Equal(body, orig) {
			t.Fatal("Decode changed its input")
		}
		if err != nil {
			checkError(t, err, len(body))
		} else {
			for i, r := range fast.Records {
				if cap(r.Data) != len(r.Data) {
					t.Fatalf("record %d: Data cap %d, len %d", i, cap(r.Data), len(r.Data))
				}
			}
		}
		sdk, sdkErr := call(ok200(body))
		switch {
		case sdkErr == nil && err != nil:
			t.Fatalf("the SDK decodes %q, Decode fails: %v", body, err)
		case sdkErr == nil:
			requireEqualOutputs(t, strconv.Quote(string(body)), sdk, fast)
		case err == nil:
			t.Fatalf("the SDK refuses %q (%v), Decode accepts it", body, sdkErr)
		}
	})
}

func checkError(t *testing.T, err error, size int) {
	t.Helper()
	var de *smithy.DeserializationError
	if !errors.As(err, &de) {
		t.Fatalf("error %v (%T) is not a *smithy.DeserializationError", err, err)
	}
	m := offsetRE.FindStringSubmatch(err.Error())
	if m == nil {
		t.Fatalf("error %q names no offset", err)
	}
	if off, _ := strconv.Atoi(m[1]); off < 0 || off > size {
		t.Fatalf("error %q: offset outside the %d-byte body", err, size)
	}
	if len(err.Error()) > 512 {
		t.Fatalf("error message of %d bytes", len(err.Error()))
	}
}
