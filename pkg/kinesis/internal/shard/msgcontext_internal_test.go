package shard

import (
	"errors"
	"reflect"
	"testing"
	"time"
)

// TestSameRecordCopiesEveryFact: a Nack's fresh context (sameRecord) carries every fact of the
// record, field by field; a field added to messageContext and not to sameRecord fails here.
// Only the context's own state (cancelled, mu, live) is not copied.
func TestSameRecordCopiesEveryFact(t *testing.T) {
	own := map[string]bool{"cancelled": true, "mu": true, "live": true}
	from := &messageContext{
		facts: &readerFacts{stream: "s"}, seq: "1", key: "k", arrival: time.Unix(1, 0),
		behind: 5, decodeError: errors.New("bad"), sub: 3, aggregated: true,
	}
	v := reflect.ValueOf(from).Elem()
	for i := range v.NumField() {
		if f := v.Type().Field(i); !own[f.Name] && v.Field(i).IsZero() {
			t.Fatalf("field %s is zero in the test's context: give it a value", f.Name)
		}
	}
	c := &messageContext{}
	c.sameRecord(from)
	got := reflect.ValueOf(c).Elem()
	for i := range v.NumField() {
		if f := v.Type().Field(i); !own[f.Name] && !got.Field(i).Equal(v.Field(i)) {
			t.Errorf("sameRecord did not copy %s", f.Name)
		}
	}
}
