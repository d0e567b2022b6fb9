package kinesis

import (
	"reflect"
	"testing"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis/internal/shard"
)

// TestPoisonRecordMirror: publicPoison copies shard.PoisonRecord into PoisonRecord field by
// field (Info by a conversion, which the compiler checks), so a field added to one of them
// and not to both the other and publicPoison would reach the PoisonHandler empty. The two
// must name the same fields, and publicPoison must carry each.
func TestPoisonRecordMirror(t *testing.T) {
	in, out := reflect.TypeFor[shard.PoisonRecord](), reflect.TypeFor[PoisonRecord]()
	if in.NumField() != out.NumField() {
		t.Fatalf("shard.PoisonRecord has %d fields, PoisonRecord %d", in.NumField(), out.NumField())
	}
	for i := range in.NumField() {
		if name := in.Field(i).Name; out.Field(i).Name != name {
			t.Errorf("field %d: shard.PoisonRecord.%s, PoisonRecord.%s", i, name, out.Field(i).Name)
		}
	}
	p := shard.PoisonRecord{Info: shard.RecordInfo{ShardID: "s"}, Data: []byte("d"), Err: errNilMessage, Decoded: message.NewMessage("u", nil)}
	got := publicPoison(p)
	if got.Info.ShardID != "s" || string(got.Data) != "d" || got.Err != errNilMessage || got.Decoded != p.Decoded {
		t.Errorf("publicPoison(%+v) = %+v", p, got)
	}
	for i := range out.NumField() {
		if f := out.Field(i); reflect.ValueOf(got).Field(i).IsZero() {
			t.Errorf("publicPoison left PoisonRecord.%s empty", f.Name)
		}
	}
}
