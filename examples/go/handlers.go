package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	baton "github.com/baton-dev/baton/sdk/go"
)

// registry holds the order-fulfilment handlers (examples/order_fulfilment/definition.json).
func registry() *baton.Registry {
	r := baton.NewRegistry()
	r.Register("reserve-stock", reserveStock)
	r.Register("charge-card", chargeCard)
	r.Register("ship-parcel", shipParcel)
	r.Register("send-confirmation", sendConfirmation)
	return r
}

func token(prefix string, parts ...any) string {
	text := make([]string, len(parts))
	for i, p := range parts {
		text[i] = fmt.Sprint(p)
	}
	sum := sha256.Sum256([]byte(strings.Join(text, "|")))
	return prefix + "-" + strings.ToUpper(hex.EncodeToString(sum[:])[:8])
}

type orderItem struct {
	SKU string `json:"sku"`
	Qty int    `json:"qty"`
}

// reserveStock reserves every item of the order.
func reserveStock(_ context.Context, job *baton.Job) (map[string]any, error) {
	var in struct {
		Items []orderItem `json:"items"`
	}
	if err := job.Decode(&in); err != nil {
		return nil, baton.NonRetryable(fmt.Errorf("unreadable input: %w", err))
	}
	if len(in.Items) == 0 {
		return nil, baton.NonRetryable(errors.New("the order has no items"))
	}
	units := 0
	for _, item := range in.Items {
		units += max(item.Qty, 1)
	}
	job.Logger.Info("stock reserved", "units", units)
	return map[string]any{"reservationId": token("RSV", job.InstanceID), "unitsReserved": units}, nil
}

// chargeCard charges the customer; the simulated gateway times out on the first attempt.
func chargeCard(_ context.Context, job *baton.Job) (map[string]any, error) {
	amount, _ := job.Input["amount"].(float64)
	if amount <= 0 {
		return nil, baton.NonRetryable(fmt.Errorf("cannot charge %v: the amount must be positive", amount))
	}
	if job.Attempt == 1 {
		// A plain error is retryable: the engine schedules attempt 2 after retryDelaySeconds.
		return nil, errors.New("payment gateway timed out (simulated; attempt 2 will succeed)")
	}
	job.Logger.Info("card charged", "amount", amount)
	return map[string]any{"receipt": token("RCPT", job.InstanceID), "charged": amount}, nil
}

// shipParcel hands the parcel to the carrier.
func shipParcel(_ context.Context, job *baton.Job) (map[string]any, error) {
	tracking := token("TRK", job.InstanceID, job.Input["address"])
	job.Logger.Info("parcel shipped", "tracking", tracking)
	return map[string]any{"tracking": tracking}, nil
}

// sendConfirmation emails the customer; it honours its context like any blocking call should.
func sendConfirmation(ctx context.Context, job *baton.Job) (map[string]any, error) {
	select {
	case <-time.After(50 * time.Millisecond): // stands in for an SMTP or HTTP call
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	}
	job.Logger.Info("confirmation sent", "to", job.Input["email"])
	return map[string]any{"confirmationSent": true}, nil
}
