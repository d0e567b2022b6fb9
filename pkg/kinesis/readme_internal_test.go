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

// configDoc is the page that holds the complete configuration tables, and readmeDoc the front
// page, whose table repeats the most used fields; both relative to this package's directory.
const (
	configDoc = "../../docs/configuration.md"
	readmeDoc = "../../README.md"
)

// TestDocsConfiguration keeps the configuration tables of docs/configuration.md honest: each
// table names every exported field of its config and nothing else, and each default it states
// is the one setValueDefaults fills in. A field added without a row, or a default changed in one
// place only, fails here rather than misleading a reader. The README's shorter table is held to
// the same defaults by TestREADMEConfigurationExcerpt.
func TestDocsConfiguration(t *testing.T) {
	doc, err := os.ReadFile(configDoc)
	if err != nil {
		t.Fatal(err)
	}
	var sub SubscriberConfig
	sub.setValueDefaults()
	var pub PublisherConfig
	pub.setValueDefaults()
	// The fan-out fields get their defaults only when fan-out is on, and in a group.
	var fanOut SubscriberConfig
	fanOut.Group.Name = "billing"
	fanOut.FanOut.Enabled = true
	fanOut.setValueDefaults()
	tables := map[string]map[string]readmeRow{}
	for _, tc := range []struct {
		header string // the table's first header cell
		config reflect.Value
	}{
		{"`SubscriberConfig` field", reflect.ValueOf(sub)},
		{"`GroupConfig` field (`SubscriberConfig.Group`)", reflect.ValueOf(sub.Group)},
		{"`FanOutConfig` field (`SubscriberConfig.FanOut`)", reflect.ValueOf(sub.FanOut)},
		{"`PublisherConfig` field", reflect.ValueOf(pub)},
	} {
		typ := tc.config.Type()
		rows, err := readmeTable(string(doc), tc.header)
		if err != nil {
			t.Errorf("docs/configuration.md: %v", err)
			continue
		}
		tables[typ.Name()] = rows
		for i := range typ.NumField() {
			f := typ.Field(i)
			if !f.IsExported() {
				continue
			}
			row, ok := rows[f.Name]
			if !ok {
				t.Errorf("docs/configuration.md's %s table has no row for %s", typ.Name(), f.Name)
				continue
			}
			switch f.Name {
			case "LeaseRenewInterval", "ConsumerName", "RegisterTimeout": // checked below
				continue
			}
			want, ok := readmeDefault(tc.config.Field(i))
			if !ok {
				continue
			}
			if got := readmeDefaultValue(row.defaultCell); got != want {
				t.Errorf("docs/configuration.md says %s.%s defaults to %q; the code sets %s", typ.Name(), f.Name, row.defaultCell, want)
			}
		}
		for name := range rows {
			if _, ok := typ.FieldByName(name); !ok {
				t.Errorf("docs/configuration.md's %s table has a row for %s, which is not a field of it", typ.Name(), name)
			}
		}
	}

	// The defaults that depend on other fields, and the hooks, named in the Hooks row.
	group, subscriber, fan := tables["GroupConfig"], tables["SubscriberConfig"], tables["FanOutConfig"]
	if group == nil || subscriber == nil || fan == nil {
		return
	}
	if sub.Group.LeaseRenewInterval != sub.Group.LeaseDuration/3 || group["LeaseRenewInterval"].defaultCell != "`LeaseDuration` / 3" {
		t.Errorf("LeaseRenewInterval defaults to %s with LeaseDuration %s; docs/configuration.md says %q, want `LeaseDuration` / 3",
			sub.Group.LeaseRenewInterval, sub.Group.LeaseDuration, group["LeaseRenewInterval"].defaultCell)
	}
	byKey := SubscriberConfig{Ordering: OrderByKey}
	byKey.setValueDefaults()
	if want := fmt.Sprintf("%d; %d with `OrderByKey` or `Unordered`", sub.MaxInFlight, byKey.MaxInFlight); subscriber["MaxInFlight"].defaultCell != want {
		t.Errorf("docs/configuration.md says MaxInFlight defaults to %q, want %q", subscriber["MaxInFlight"].defaultCell, want)
	}
	if fanOut.FanOut.ConsumerName != fanOut.Group.Name || fan["ConsumerName"].defaultCell != "`Group.Name`" {
		t.Errorf("FanOut.ConsumerName defaults to %q with Group.Name %q; docs/configuration.md says %q, want `Group.Name`",
			fanOut.FanOut.ConsumerName, fanOut.Group.Name, fan["ConsumerName"].defaultCell)
	}
	if want := fmt.Sprintf("%d minutes", fanOut.FanOut.RegisterTimeout/time.Minute); fanOut.FanOut.RegisterTimeout%time.Minute != 0 || fan["RegisterTimeout"].defaultCell != want {
		t.Errorf("FanOut.RegisterTimeout defaults to %s; docs/configuration.md says %q", fanOut.FanOut.RegisterTimeout, fan["RegisterTimeout"].defaultCell)
	}
	hooks := reflect.TypeFor[ShardHooks]()
	for i := range hooks.NumField() {
		if name := hooks.Field(i).Name; !strings.Contains(group["Hooks"].trades, "`"+name+"`") {
			t.Errorf("docs/configuration.md's Hooks row does not name ShardHooks.%s", name)
		}
	}
}

// TestREADMEConfigurationExcerpt keeps the README's table of the most used fields in step with
// docs/configuration.md: every row names a field by its path from SubscriberConfig or
// PublisherConfig (`SubscriberConfig.Group.Name`), the field exists, and the default the README
// gives is, word for word, the one the complete table gives (which TestDocsConfiguration checks
// against the code).
func TestREADMEConfigurationExcerpt(t *testing.T) {
	readme, err := os.ReadFile(readmeDoc)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile(configDoc)
	if err != nil {
		t.Fatal(err)
	}
	excerpt, err := readmeTable(string(readme), "field")
	if err != nil {
		t.Fatalf("README.md: %v", err)
	}
	if len(excerpt) == 0 {
		t.Fatal("README.md's configuration table has no rows")
	}
	// The complete table that lists a field, by the path of the struct that holds it.
	headers := map[string]string{
		"SubscriberConfig":        "`SubscriberConfig` field",
		"SubscriberConfig.Group":  "`GroupConfig` field (`SubscriberConfig.Group`)",
		"SubscriberConfig.FanOut": "`FanOutConfig` field (`SubscriberConfig.FanOut`)",
		"PublisherConfig":         "`PublisherConfig` field",
	}
	roots := map[string]reflect.Type{
		"SubscriberConfig": reflect.TypeFor[SubscriberConfig](),
		"PublisherConfig":  reflect.TypeFor[PublisherConfig](),
	}
	for path, row := range excerpt {
		parts := strings.Split(path, ".")
		typ, ok := roots[parts[0]]
		if !ok || len(parts) < 2 {
			t.Errorf("README.md's configuration table has a row for %q, want a path such as SubscriberConfig.Group.Name", path)
			continue
		}
		for _, name := range parts[1:] {
			f, ok := typ.FieldByName(name)
			if !ok || !f.IsExported() {
				t.Errorf("README.md's configuration table has a row for %s: %s has no field %s", path, typ.Name(), name)
				typ = nil
				break
			}
			typ = f.Type
		}
		if typ == nil {
			continue
		}
		holder, field := strings.Join(parts[:len(parts)-1], "."), parts[len(parts)-1]
		header, ok := headers[holder]
		if !ok {
			t.Errorf("README.md's configuration table has a row for %s, which no table of docs/configuration.md lists", path)
			continue
		}
		rows, err := readmeTable(string(doc), header)
		if err != nil {
			t.Errorf("docs/configuration.md: %v", err)
			continue
		}
		full, ok := rows[field]
		if !ok {
			t.Errorf("docs/configuration.md's table %q has no row for %s", header, field)
			continue
		}
		if row.defaultCell != full.defaultCell {
			t.Errorf("README.md says %s defaults to %q; docs/configuration.md says %q", path, row.defaultCell, full.defaultCell)
		}
	}
}

// readmeRow is one row of a configuration table, in the README or docs/configuration.md.
type readmeRow struct{ defaultCell, trades string }

// readmeTable returns the rows, by field name, of the markdown table whose header starts with
// header.
func readmeTable(readme, header string) (map[string]readmeRow, error) {
	_, table, found := strings.Cut(readme, "\n| "+header+" |")
	if !found {
		return nil, fmt.Errorf("no table headed %q", header)
	}
	rows := map[string]readmeRow{}
	lines := strings.Split(table, "\n")[1:] // past the header
	for _, line := range lines[1:] {        // past the |---| line
		if !strings.HasPrefix(line, "| `") {
			break
		}
		cells := strings.Split(strings.Trim(line, "| "), " | ")
		if len(cells) != 3 {
			return nil, fmt.Errorf("table %q: row %q has %d cells, want 3", header, line, len(cells))
		}
		name := strings.Trim(cells[0], "`")
		if _, dup := rows[name]; dup {
			return nil, fmt.Errorf("table %q has two rows for %s", header, name)
		}
		rows[name] = readmeRow{defaultCell: cells[1], trades: cells[2]}
	}
	return rows, nil
}

// readmeDefaultValue is the value a default cell starts with, without its backticks and
// before any explanation ("1; 32 with ...", "none (a no-op)", "none: set it or ...").
func readmeDefaultValue(cell string) string {
	if i := strings.IndexAny(cell, ";:("); i >= 0 {
		cell = cell[:i]
	}
	return strings.TrimSpace(strings.ReplaceAll(cell, "`", ""))
}

// readmeDefault renders a default as the configuration tables write it, or reports false for a
// value they describe in words (a client, a generated worker id).
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
