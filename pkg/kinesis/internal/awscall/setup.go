package awscall

import (
	"context"
	"errors"
	"fmt"

	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/smithy-go/middleware"
)

// Stage is how far an SDK call got before it failed: the steps a request goes through in the
// SDK before it is sent, in order.
type Stage int

const (
	// StageSerialize: the input was being checked and encoded.
	StageSerialize Stage = iota
	// StageCredentials: the SDK was getting credentials (its credential chain).
	StageCredentials
	// StageEndpoint: the SDK was resolving the endpoint (from the region, or a set endpoint).
	StageEndpoint
	// StageSign: the request was being signed.
	StageSign
	// StageSent: the request went to the HTTP client. An error from here on is the network's
	// or the service's, and is classified by its type.
	StageSent
)

// SetupError is a call that failed before it left this process: the SDK found no credentials,
// could not resolve an endpoint (no region), or could not sign or encode the request. Retrying
// never helps: the setup must change, and Error says what to set.
type SetupError struct {
	// Service is the SDK's service name ("Kinesis", "DynamoDB").
	Service string
	// Stage is the step that failed (never StageSent).
	Stage Stage
	// Err is the SDK's error.
	Err error
}

// Error says what to fix, then the SDK's words.
func (e *SetupError) Error() string {
	return fmt.Sprintf("%s: %v", e.Hint(), e.Err)
}

// Unwrap returns the SDK's error.
func (e *SetupError) Unwrap() error { return e.Err }

// RetryableError tells an SDK retryer (the lease store's DynamoDB client keeps the SDK's) not
// to try again: the credential chain's own connection errors inside would otherwise be retried,
// with backoff, before the error that says what to set comes out.
func (e *SetupError) RetryableError() bool { return false }

// Hint says what to set for the stage that failed.
func (e *SetupError) Hint() string {
	switch e.Stage {
	case StageCredentials:
		return "no AWS credentials for " + e.Service + ": the SDK's credential chain found none that work " +
			"(set AWS_PROFILE, or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or run with an IAM role; " +
			"for a local emulator any non-empty keys do)"
	case StageEndpoint:
		return "no endpoint for " + e.Service + ": set a region (AWS_REGION, or region in the AWS profile, " +
			"or aws.Config.Region), or an endpoint (" + endpointVariable(e.Service) + " or AWS_ENDPOINT_URL)"
	case StageSign:
		return "the " + e.Service + " request could not be signed (check the credentials and the region)"
	default:
		return "the " + e.Service + " request could not be encoded"
	}
}

// endpointVariable is the SDK's environment variable for the endpoint of one service.
func endpointVariable(service string) string {
	switch service {
	case "DynamoDB":
		return "AWS_ENDPOINT_URL_DYNAMODB"
	default:
		return "AWS_ENDPOINT_URL_KINESIS"
	}
}

// ExplainSetup is an SDK stack option (for Options.APIOptions) that turns an error raised
// before the request was sent into a *SetupError naming the stage that failed. The SDK's own
// errors for a missing region or missing credentials have no type of their own (they are
// formatted strings inside *smithy.OperationError); the stage the call reached is what tells
// them apart, and it is known by type, from the stack: markers placed right after the SDK's
// middleware named "GetIdentity", "ResolveEndpointV2" and "Signing", and at the end of the
// finalize step. A stack without one of them (another SDK version may rename it) gets no
// marker there, and its failures count as the stage before.
func ExplainSetup(stack *middleware.Stack) error {
	if err := stack.Initialize.Add(middleware.InitializeMiddlewareFunc("watermillKinesisExplainSetup",
		func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
			reached := new(Stage)
			out, md, err := next.HandleInitialize(context.WithValue(ctx, stageKey{}, reached), in)
			return out, md, explain(ctx, *reached, err)
		}), middleware.Before); err != nil {
		return err
	}
	// Each attempt of the SDK's retryer starts past serialisation; its pre-send failure is
	// explained inside the retry loop, so that the retryer sees a SetupError and stops.
	if _, ok := stack.Finalize.Get("Retry"); ok {
		if err := stack.Finalize.Insert(middleware.FinalizeMiddlewareFunc("watermillKinesisAttempt",
			func(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
				reached, ok := ctx.Value(stageKey{}).(*Stage)
				if !ok {
					return next.HandleFinalize(ctx, in)
				}
				*reached = StageCredentials
				out, md, err := next.HandleFinalize(ctx, in)
				return out, md, explain(ctx, *reached, err)
			}), "Retry", middleware.After); err != nil {
			return err
		}
	}
	for _, m := range []struct {
		after string
		stage Stage
	}{{"ResolveAuthScheme", StageCredentials}, {"GetIdentity", StageEndpoint}, {"ResolveEndpointV2", StageSign}} {
		if _, ok := stack.Finalize.Get(m.after); !ok {
			continue
		}
		if err := stack.Finalize.Insert(marker(m.stage), m.after, middleware.After); err != nil {
			return err
		}
	}
	return stack.Finalize.Add(marker(StageSent), middleware.After)
}

// explain makes err, of a call that reached stage, a *SetupError if it failed before it was
// sent (and is not one already, and is not the caller giving up).
func explain(ctx context.Context, stage Stage, err error) error {
	var already *SetupError
	if err == nil || stage >= StageSent || ctx.Err() != nil || errors.As(err, &already) {
		return err
	}
	return &SetupError{Service: serviceOf(ctx), Stage: stage, Err: err}
}

// serviceOf is the SDK's service name of the call ("Kinesis", "DynamoDB").
func serviceOf(ctx context.Context) string {
	if id := awsmiddleware.GetServiceID(ctx); id != "" {
		return id
	}
	return "AWS"
}

// stageKey keys the *Stage of one call in its context.
type stageKey struct{}

// marker records that the call reached stage.
func marker(stage Stage) middleware.FinalizeMiddleware {
	return middleware.FinalizeMiddlewareFunc(fmt.Sprintf("watermillKinesisStage%d", stage),
		func(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
			if reached, ok := ctx.Value(stageKey{}).(*Stage); ok {
				*reached = stage
			}
			return next.HandleFinalize(ctx, in)
		})
}
