package lease_test

import (
	"testing"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/lease"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/lease/leasetest"
)

// kclIdentifier is a multi-stream KCL stream identifier of the tests' account.
func kclIdentifier(stream string) string { return "123456789012:" + stream + ":1700000000" }

// The conformance suite on KCL lease tables, single- and multi-stream: every subtest's group is
// a KCL application with a table of its own, and the member records share one member table.
func TestKCLStoreConformance(t *testing.T) {
	c := dynamoClient(t)
	members := tableName(t, "kcl-members")
	for _, multi := range []bool{false, true} {
		name := "single-stream"
		if multi {
			name = "multi-stream"
		}
		t.Run(name, func(t *testing.T) {
			leasetest.RunScoped(t, leasetest.Scope{MultiStream: multi}, func(t *testing.T, group, stream string) lease.Store {
				cfg := lease.KCLConfig{Client: c, TableName: tableName(t, "kcl"), Application: group, MemberTableName: members, CreateLeaseTable: true, CreateMemberTable: true}
				if multi {
					cfg.MultiStream = true
					cfg.StreamIdentifiers = map[string]string{stream: kclIdentifier(stream), "stream-b": kclIdentifier("stream-b")}
				} else {
					cfg.Stream = stream
				}
				s, err := lease.NewKCLStore(t.Context(), cfg)
				if err != nil {
					t.Fatalf("NewKCLStore: %v", err)
				}
				return s
			})
		})
	}
}
