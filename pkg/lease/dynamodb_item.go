package lease

import (
	"errors"
	"fmt"
	"reflect"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// itemShardID is the item's sort key, or "" if it has none, for error messages.
func itemShardID(item map[string]types.AttributeValue) string {
	sv, _ := item[attrShardID].(*types.AttributeValueMemberS)
	if sv == nil {
		return ""
	}
	return sv.Value
}

func numberValue(n int64) *types.AttributeValueMemberN {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(n, 10)}
}

// leaseToItem is the item of l; see DynamoDBStore for the layout. Empty optional fields are left
// out rather than stored as empty values.
func leaseToItem(l Lease) map[string]types.AttributeValue {
	item := keyItem(l.Key())
	item[attrGroup] = &types.AttributeValueMemberS{Value: l.Group}
	item[attrStream] = &types.AttributeValueMemberS{Value: l.Stream}
	item[attrGeneration] = numberValue(l.Generation)
	item[attrCounter] = numberValue(l.Counter)
	if l.Owner != "" {
		item[attrOwner] = &types.AttributeValueMemberS{Value: l.Owner}
	}
	if l.Checkpoint != "" {
		item[attrCheckpoint] = &types.AttributeValueMemberS{Value: l.Checkpoint}
	}
	if len(l.Parents) > 0 {
		parents := make([]types.AttributeValue, len(l.Parents))
		for i, p := range l.Parents {
			parents[i] = &types.AttributeValueMemberS{Value: p}
		}
		item[attrParents] = &types.AttributeValueMemberL{Value: parents}
	}
	if l.PendingOwner != "" {
		item[attrPendingOwner] = &types.AttributeValueMemberS{Value: l.PendingOwner}
	}
	if l.Incarnation != 0 {
		item[attrIncarnation] = numberValue(l.Incarnation)
	}
	return item
}

// leaseFromItem reads a lease from an item. It never panics: an item that is not a lease as
// leaseToItem writes it (an attribute missing, of the wrong type, a number that is not an
// int64, a partition key that is not DynamoDBPartitionKey of its group, stream and shard) is an
// error that says what is wrong.
func leaseFromItem(item map[string]types.AttributeValue) (Lease, error) {
	return parseLeaseItem(item, DynamoDBPartitionKey)
}

// oldLeaseFromItem reads a lease item of the old layout: as leaseFromItem, but its partition key
// must be stream|group. It is how earlier versions read every item of their partition, so what
// it refuses (the layout marker, say) an earlier version refuses too.
func oldLeaseFromItem(item map[string]types.AttributeValue) (Lease, error) {
	return parseLeaseItem(item, func(k Key) string { return partitionKey(k.Group, k.Stream) })
}

// parseLeaseItem reads a lease from an item whose partition key must be wantPK of its key.
func parseLeaseItem(item map[string]types.AttributeValue, wantPK func(Key) string) (Lease, error) {
	if len(item) == 0 {
		return Lease{}, errors.New("the item is empty")
	}
	var (
		l    Lease
		errs []error
	)
	str := func(name string, required bool) string {
		v, ok := item[name]
		if !ok {
			if required {
				errs = append(errs, fmt.Errorf("attribute %q is missing", name))
			}
			return ""
		}
		sv, ok := v.(*types.AttributeValueMemberS)
		if !ok || sv == nil {
			errs = append(errs, fmt.Errorf("attribute %q is a %s, want a string (S)", name, attrType(v)))
			return ""
		}
		if required && sv.Value == "" {
			errs = append(errs, fmt.Errorf("attribute %q is empty", name))
		}
		return sv.Value
	}
	num := func(name string) int64 {
		v, ok := item[name]
		if !ok {
			errs = append(errs, fmt.Errorf("attribute %q is missing", name))
			return 0
		}
		nv, ok := v.(*types.AttributeValueMemberN)
		if !ok || nv == nil {
			errs = append(errs, fmt.Errorf("attribute %q is a %s, want a number (N)", name, attrType(v)))
			return 0
		}
		n, err := strconv.ParseInt(nv.Value, 10, 64)
		if err != nil {
			errs = append(errs, fmt.Errorf("attribute %q = %q is not a whole number: %w", name, nv.Value, err))
		}
		return n
	}
	pk := str(attrPK, true)
	l.ShardID = str(attrShardID, true)
	l.Group = str(attrGroup, true)
	l.Stream = str(attrStream, true)
	l.Owner = str(attrOwner, false)
	l.Generation = num(attrGeneration)
	l.Counter = num(attrCounter)
	l.Checkpoint = str(attrCheckpoint, false)
	l.PendingOwner = str(attrPendingOwner, false)
	if _, ok := item[attrIncarnation]; ok { // absent from leases no heartbeat vouches for
		l.Incarnation = num(attrIncarnation)
	}
	if v, ok := item[attrParents]; ok {
		lv, ok := v.(*types.AttributeValueMemberL)
		if !ok || lv == nil {
			errs = append(errs, fmt.Errorf("attribute %q is a %s, want a list (L) of strings", attrParents, attrType(v)))
		} else if len(lv.Value) > 0 {
			l.Parents = make([]string, 0, len(lv.Value))
			for i, e := range lv.Value {
				sv, ok := e.(*types.AttributeValueMemberS)
				if !ok || sv == nil {
					errs = append(errs, fmt.Errorf("attribute %q element %d is a %s, want a string (S)", attrParents, i, attrType(e)))
					continue
				}
				l.Parents = append(l.Parents, sv.Value)
			}
		}
	}
	if pk != "" && l.Group != "" && l.Stream != "" {
		if want := wantPK(l.Key()); pk != want {
			errs = append(errs, fmt.Errorf("attribute %q = %q does not match stream %q, group %q and shard %q (want %q)",
				attrPK, pk, l.Stream, l.Group, l.ShardID, want))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return Lease{}, err
	}
	return l, nil
}

// attrType names the DynamoDB type of v for error messages.
func attrType(v types.AttributeValue) string {
	if v == nil {
		return "nil value"
	}
	if rv := reflect.ValueOf(v); rv.Kind() == reflect.Pointer && rv.IsNil() {
		return "nil value"
	}
	switch v.(type) {
	case *types.AttributeValueMemberS:
		return "string (S)"
	case *types.AttributeValueMemberN:
		return "number (N)"
	case *types.AttributeValueMemberB:
		return "binary (B)"
	case *types.AttributeValueMemberBOOL:
		return "boolean (BOOL)"
	case *types.AttributeValueMemberNULL:
		return "null (NULL)"
	case *types.AttributeValueMemberL:
		return "list (L)"
	case *types.AttributeValueMemberM:
		return "map (M)"
	case *types.AttributeValueMemberSS:
		return "string set (SS)"
	case *types.AttributeValueMemberNS:
		return "number set (NS)"
	case *types.AttributeValueMemberBS:
		return "binary set (BS)"
	default:
		return fmt.Sprintf("%T", v)
	}
}
