package kinesis

import (
	"fmt"
	"os"
	"reflect"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestREADMEConfiguration keeps the README's configuration tables honest: each table names
// every exported field of its config and nothing else, and each default it states is the one
// setValueDefaults fills in. A field added without a row, or a default changed in one place
// only, fails here rather than misleading a reader.
func TestREADMEConfiguration(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	var sub SubscriberConfig
	sub.setValueDefaults()
	var pub PublisherConfig
	pub.setValueDefaults()
	for _, tc := range []struct {
		header string // the table's first header cell
		config reflect.Value
	}{
		{"`SubscriberConfig` field", reflect.ValueOf(sub)},
		{"`GroupConfig` field (`SubscriberConfig.Group`)", reflect.ValueOf(sub.Group)},
		{"`PublisherConfig` field", reflect.ValueOf(pub)},
	} {
		t.Run(tc.config.Type().Name(), func(t *testing.T) {
			rows := readmeTable(string(readme), tc.header)
			if rows == nil {
				t.Fatalf("README.md has no table headed %q", tc.header)
			}
			typ := tc.config.Type()
			for i := range typ.NumField() {
				f := typ.Field(i)
				if !f.IsExported() {
					continue
				}
				cell, ok := rows[f.Name]
				if !ok {
					t.Errorf("README.md's %s table has no row for %s", typ.Name(), f.Name)
					continue
				}
				delete(rows, f.Name)
				if f.Name == "LeaseRenewInterval" { // derived from LeaseDuration: checked below
					continue
				}
				want, ok := readmeDefault(tc.config.Field(i))
				if !ok {
					continue
				}
				if !strings.HasPrefix(strings.ReplaceAll(cell, "`", ""), want) {
					t.Errorf("README.md says %s.%s defaults to %q; the code sets %s", typ.Name(), f.Name, cell, want)
				}
			}
			for name := range rows {
				t.Errorf("README.md's %s table has a row for %s, which is not a field of it", typ.Name(), name)
			}
		})
	}

	// The defaults that depend on other fields.
	if sub.Group.LeaseRenewInterval != sub.Group.LeaseDuration/3 || !strings.Contains(string(readme), "| `LeaseRenewInterval` | `LeaseDuration` / 3 |") {
		t.Errorf("LeaseRenewInterval defaults to %s with LeaseDuration %s; README.md must say `LeaseDuration` / 3", sub.Group.LeaseRenewInterval, sub.Group.LeaseDuration)
	}
	byKey := SubscriberConfig{Ordering: OrderByKey}
	byKey.setValueDefaults()
	if want := fmt.Sprintf("| `MaxInFlight` | 1; %d with `OrderByKey` or `Unordered` |", byKey.MaxInFlight); !strings.Contains(string(readme), want) {
		t.Errorf("README.md lacks %q", want)
	}
}

// readmeTable returns the field → default cell of the markdown table whose header starts with
// header, or nil.
func readmeTable(readme, header string) map[string]string {
	_, table, found := strings.Cut(readme, "\n| "+header+" |")
	if !found {
		return nil
	}
	rows := map[string]string{}
	lines := strings.Split(table, "\n")[1:] // past the header
	for _, line := range lines[1:] {        // past the |---| line
		if !strings.HasPrefix(line, "| `") {
			break
		}
		cells := strings.Split(line, " | ")
		if len(cells) < 3 {
			continue
		}
		rows[strings.Trim(cells[0], "|` ")] = cells[1]
	}
	return rows
}

// readmeDefault renders a default as the README writes it, or reports false for a value the
// README describes in words (a client, a clock, a generated worker id).
func readmeDefault(v reflect.Value) (string, bool) {
	switch x := v.Interface().(type) {
	case time.Duration:
		if x%time.Second == 0 {
			return fmt.Sprintf("%d s", x/time.Second), true
		}
		return fmt.Sprintf("%d ms", x/time.Millisecond), true
	case Ordering:
		return x.String(), true
	case Position:
		return map[PositionType]string{TrimHorizon: "TrimHorizon", Latest: "Latest", AtTimestamp: "AtTimestamp"}[x.Type], true
	case bool:
		return strconv.FormatBool(x), true
	case int, int32, int64:
		n := v.Int()
		if n >= 1<<20 && n%(1<<20) == 0 {
			return fmt.Sprintf("%d MiB", n>>20), true
		}
		return thousands(n), true
	case Unmarshaler, Marshaler:
		return reflect.TypeOf(x).Name(), true
	case PoisonHandler, PartitionKeyFunc:
		name := runtime.FuncForPC(v.Pointer()).Name()
		return name[strings.LastIndex(name, ".")+1:], true
	}
	return "", false
}

func thousands(n int64) string {
	s := strconv.FormatInt(n, 10)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
