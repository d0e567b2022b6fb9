package lease

import (
	"errors"
	"fmt"
	"reflect"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/lease/internal/dynamo"
)

// itemShardID is the item's sort key, or "" if it has none, for error messages.
func itemShardID(item map[string]types.AttributeValue) string {
	sv, _ := item[attrShardID].(*types.AttributeValueMemberS)
	if sv == nil {
		return ""
	}
	return sv.Value
}

// leaseToItem is the item of l; see DynamoDBStore for the layout. Empty optional fields are left
// out rather than stored as empty values.
func leaseToItem(l Lease) map[string]types.AttributeValue {
	item := keyItem(l.Key())
	item[attrGroup] = &types.AttributeValueMemberS{Value: l.Group}
	item[attrStream] = &types.AttributeValueMemberS{Value: l.Stream}
	item[attrGeneration] = dynamo.Number(l.Generation)
	item[attrCounter] = dynamo.Number(l.Counter)
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
	return item
}

// itemReader reads the attributes of one item, collecting what is wrong with them.
type itemReader struct {
	item map[string]types.AttributeValue
	errs []error
}

// str reads a string attribute: "" when absent, which is wrong if it is required, and so is an
// empty one.
func (r *itemReader) str(name string, required bool) string {
	v, ok := r.item[name]
	if !ok {
		if required {
			r.errs = append(r.errs, fmt.Errorf("attribute %q is missing", name))
		}
		return ""
	}
	sv, ok := v.(*types.AttributeValueMemberS)
	if !ok || sv == nil {
		r.errs = append(r.errs, fmt.Errorf("attribute %q is a %s, want a string (S)", name, attrType(v)))
		return ""
	}
	if required && sv.Value == "" {
		r.errs = append(r.errs, fmt.Errorf("attribute %q is empty", name))
	}
	return sv.Value
}

// num reads a whole-number attribute: 0 when absent, which is wrong if it is required.
func (r *itemReader) num(name string, required bool) int64 {
	v, ok := r.item[name]
	if !ok {
		if required {
			r.errs = append(r.errs, fmt.Errorf("attribute %q is missing", name))
		}
		return 0
	}
	nv, ok := v.(*types.AttributeValueMemberN)
	if !ok || nv == nil {
		r.errs = append(r.errs, fmt.Errorf("attribute %q is a %s, want a number (N)", name, attrType(v)))
		return 0
	}
	n, err := strconv.ParseInt(nv.Value, 10, 64)
	if err != nil {
		r.errs = append(r.errs, fmt.Errorf("attribute %q = %q is not a whole number: %w", name, nv.Value, err))
	}
	return n
}

// leaseFromItem reads a lease from an item. It never panics: an item that is not a lease as
// leaseToItem writes it (an attribute missing, of the wrong type, a number that is not an
// int64, a partition key that is not DynamoDBPartitionKey of its group, stream and shard) is an
// error that says what is wrong.
func leaseFromItem(item map[string]types.AttributeValue) (Lease, error) {
	if len(item) == 0 {
		return Lease{}, errors.New("the item is empty")
	}
	r := &itemReader{item: item}
	pk := r.str(attrPK, true)
	l := Lease{
		ShardID:      r.str(attrShardID, true),
		Group:        r.str(attrGroup, true),
		Stream:       r.str(attrStream, true),
		Owner:        r.str(attrOwner, false),
		Generation:   r.num(attrGeneration, true),
		Counter:      r.num(attrCounter, true),
		Checkpoint:   r.str(attrCheckpoint, false),
		PendingOwner: r.str(attrPendingOwner, false),
	}
	if v, ok := item[attrParents]; ok {
		lv, ok := v.(*types.AttributeValueMemberL)
		if !ok || lv == nil {
			r.errs = append(r.errs, fmt.Errorf("attribute %q is a %s, want a list (L) of strings", attrParents, attrType(v)))
		} else if len(lv.Value) > 0 {
			l.Parents = make([]string, 0, len(lv.Value))
			for i, e := range lv.Value {
				sv, ok := e.(*types.AttributeValueMemberS)
				if !ok || sv == nil {
					r.errs = append(r.errs, fmt.Errorf("attribute %q element %d is a %s, want a string (S)", attrParents, i, attrType(e)))
					continue
				}
				l.Parents = append(l.Parents, sv.Value)
			}
		}
	}
	if pk != "" && l.Group != "" && l.Stream != "" {
		if want := DynamoDBPartitionKey(l.Key()); pk != want {
			r.errs = append(r.errs, fmt.Errorf("attribute %q = %q does not match stream %q, group %q and shard %q (want %q)",
				attrPK, pk, l.Stream, l.Group, l.ShardID, want))
		}
	}
	if err := errors.Join(r.errs...); err != nil {
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
