package main

import (
	"context"
	"errors"
	"testing"

	baton "github.com/baton-dev/baton/sdk/go"
)

func TestChargeRetriesOnceThenCharges(t *testing.T) {
	job := baton.NewTestJob("charge-card", map[string]any{"amount": 59.9})
	if _, err := chargeCard(context.Background(), job); err == nil || errors.As(err, new(*baton.NonRetryableError)) {
		t.Fatalf("attempt 1: %v, want a retryable error", err)
	}
	job.Attempt = 2
	out, err := chargeCard(context.Background(), job)
	if err != nil || out["charged"] != 59.9 {
		t.Fatalf("attempt 2: %v %v", out, err)
	}
}

func TestNothingToChargeIsNotRetried(t *testing.T) {
	_, err := chargeCard(context.Background(), baton.NewTestJob("charge-card", map[string]any{"amount": 0.0}))
	var refused *baton.NonRetryableError
	if !errors.As(err, &refused) {
		t.Fatalf("%v", err)
	}
}

func TestReserveCountsUnits(t *testing.T) {
	job := baton.NewTestJob("reserve-stock", map[string]any{"items": []any{
		map[string]any{"sku": "BOOK-42", "qty": 2}, map[string]any{"sku": "MUG-7", "qty": 1}}})
	out, err := reserveStock(context.Background(), job)
	if err != nil || out["unitsReserved"] != 3 {
		t.Fatalf("%v %v", out, err)
	}
}
