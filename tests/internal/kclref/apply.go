package kclref

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"math/big"
	"slices"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// ErrConditionFailed is Apply's ConditionalCheckFailedException: the KCL
// treats it as "someone else changed the lease" and returns false.
var ErrConditionFailed = errors.New("kclref: conditional check failed")

// PutItemInput is the PutItem request of a create Write.
func (w Write) PutItemInput(table string) *dynamodb.PutItemInput {
	return &dynamodb.PutItemInput{TableName: aws.String(table), Item: w.Put, Expected: w.Expected}
}

// UpdateItemInput is the UpdateItem request of any other Write.
func (w Write) UpdateItemInput(table string) *dynamodb.UpdateItemInput {
	return &dynamodb.UpdateItemInput{
		TableName:        aws.String(table),
		Key:              map[string]types.AttributeValue{AttrLeaseKey: str(w.LeaseKey)},
		Expected:         w.Expected,
		AttributeUpdates: w.Updates,
	}
}

// Apply plays w on item (nil: no such row) as DynamoDB would and returns the
// row afterwards; item is not modified. Conditions follow the legacy Expected
// rules the KCL relies on: Exists=false means the attribute is absent; a
// Value means the attribute exists and equals it (numbers by value, sets as
// sets). An UpdateItem on a missing row starts from the key alone, as
// DynamoDB's upsert does, which is why 3.x adds a leaseKey condition.
func Apply(item map[string]types.AttributeValue, w Write) (map[string]types.AttributeValue, error) {
	for name, e := range w.Expected {
		if err := check(item, name, e); err != nil {
			return item, err
		}
	}
	if w.Put != nil {
		return maps.Clone(w.Put), nil
	}
	out := maps.Clone(item)
	if out == nil {
		out = map[string]types.AttributeValue{AttrLeaseKey: str(w.LeaseKey)}
	}
	for name, u := range w.Updates {
		switch u.Action {
		case types.AttributeActionPut:
			out[name] = u.Value
		case types.AttributeActionDelete:
			if u.Value != nil {
				return item, fmt.Errorf("kclref: DELETE with a value (on %s) is not modelled", name)
			}
			delete(out, name)
		case types.AttributeActionAdd:
			sum, err := addNumbers(out[name], u.Value)
			if err != nil {
				return item, fmt.Errorf("kclref: ADD on %s: %w", name, err)
			}
			out[name] = sum
		default:
			return item, fmt.Errorf("kclref: action %q on %s is not modelled", u.Action, name)
		}
	}
	return out, nil
}

func check(item map[string]types.AttributeValue, name string, e types.ExpectedAttributeValue) error {
	if e.ComparisonOperator != "" {
		return fmt.Errorf("kclref: comparison operators (on %s) are not modelled", name)
	}
	av, present := item[name]
	if e.Exists != nil && !*e.Exists {
		if present {
			return fmt.Errorf("%w: %s is present", ErrConditionFailed, name)
		}
		return nil
	}
	if e.Value == nil {
		return fmt.Errorf("kclref: an expectation on %s without a value is not modelled", name)
	}
	if !present || !equalValues(av, e.Value) {
		return fmt.Errorf("%w: %s differs", ErrConditionFailed, name)
	}
	return nil
}

func equalValues(a, b types.AttributeValue) bool {
	switch x := a.(type) {
	case *types.AttributeValueMemberS:
		y, ok := b.(*types.AttributeValueMemberS)
		return ok && x.Value == y.Value
	case *types.AttributeValueMemberN:
		y, ok := b.(*types.AttributeValueMemberN)
		if !ok {
			return false
		}
		p, okP := new(big.Rat).SetString(x.Value)
		q, okQ := new(big.Rat).SetString(y.Value)
		return okP && okQ && p.Cmp(q) == 0
	case *types.AttributeValueMemberB:
		y, ok := b.(*types.AttributeValueMemberB)
		return ok && bytes.Equal(x.Value, y.Value)
	case *types.AttributeValueMemberSS:
		y, ok := b.(*types.AttributeValueMemberSS)
		if !ok {
			return false
		}
		p, q := slices.Clone(x.Value), slices.Clone(y.Value)
		slices.Sort(p)
		slices.Sort(q)
		return slices.Equal(slices.Compact(p), slices.Compact(q))
	}
	return false
}

// addNumbers is DynamoDB's ADD on a number: the sum, or the operand itself
// when the attribute is absent. The KCL only ever adds 1 to a long.
func addNumbers(cur, delta types.AttributeValue) (types.AttributeValue, error) {
	d, ok := delta.(*types.AttributeValueMemberN)
	if !ok {
		return nil, errors.New("only numeric ADD is modelled")
	}
	dv, ok := new(big.Int).SetString(d.Value, 10)
	if !ok {
		return nil, fmt.Errorf("operand %q is not an integer", d.Value)
	}
	if cur == nil {
		return &types.AttributeValueMemberN{Value: dv.String()}, nil
	}
	c, ok := cur.(*types.AttributeValueMemberN)
	if !ok {
		return nil, errors.New("the attribute is not a number")
	}
	cv, ok := new(big.Int).SetString(c.Value, 10)
	if !ok {
		return nil, fmt.Errorf("current value %q is not an integer", c.Value)
	}
	return &types.AttributeValueMemberN{Value: cv.Add(cv, dv).String()}, nil
}
