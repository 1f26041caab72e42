package wire

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"unicode"
	"unicode/utf8"
)

// The limits of a session's labels (CreateRequest.Labels), checked by
// CheckLabels where a node takes them (tah.api.create) and by tahctl before
// it sends them. They keep a session's row small whatever its creator sends,
// so that a page of tah.api.list always fits in a reply.
const (
	// MaxLabels is the most labels a session has.
	MaxLabels = 64
	// MaxLabelKeyBytes is the longest key, in bytes (a key has at least one).
	MaxLabelKeyBytes = 63
	// MaxLabelValueBytes is the longest value, in bytes (a value may be empty).
	MaxLabelValueBytes = 256
	// MaxLabelsBytes bounds the sum of the lengths of all keys and values.
	MaxLabelsBytes = 16 << 10
)

// ErrInvalidLabels: labels over the limits above, or a key or value that is
// not printable UTF-8 text (no control characters: a label is shown on
// terminals). The API refuses them with APIErrBadRequest.
var ErrInvalidLabels = errors.New("invalid labels")

// CheckLabel reports, wrapping ErrInvalidLabels, what is wrong with one
// label.
func CheckLabel(key, value string) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("label %s: "+format+": %w", append([]any{quoteCut(key)}, append(args, ErrInvalidLabels)...)...)
	}
	switch {
	case key == "":
		return fmt.Errorf("a label has an empty key: %w", ErrInvalidLabels)
	case len(key) > MaxLabelKeyBytes:
		return bad("the key is %d bytes, over %d", len(key), MaxLabelKeyBytes)
	case !printable(key):
		return bad("the key is not printable UTF-8 text")
	case len(value) > MaxLabelValueBytes:
		return bad("the value is %d bytes, over %d", len(value), MaxLabelValueBytes)
	case !printable(value):
		return bad("the value is not printable UTF-8 text")
	}
	return nil
}

// CheckLabels reports, wrapping ErrInvalidLabels, labels over the limits
// (MaxLabels, MaxLabelKeyBytes, MaxLabelValueBytes, MaxLabelsBytes) or not
// printable; nil for none.
func CheckLabels(labels map[string]string) error {
	if len(labels) > MaxLabels {
		return fmt.Errorf("%d labels, over %d: %w", len(labels), MaxLabels, ErrInvalidLabels)
	}
	total := 0
	for _, k := range slices.Sorted(maps.Keys(labels)) { // the same error for the same labels
		if err := CheckLabel(k, labels[k]); err != nil {
			return err
		}
		total += len(k) + len(labels[k])
	}
	if total > MaxLabelsBytes {
		return fmt.Errorf("labels of %d bytes in all, over %d: %w", total, MaxLabelsBytes, ErrInvalidLabels)
	}
	return nil
}

// FitLabels is labels within the limits, for a session created before they
// were checked: the labels CheckLabel refuses are left out, and of the others
// the first by key up to MaxLabels and MaxLabelsBytes kept. cut reports
// whether any was left out; labels itself is returned when none was.
func FitLabels(labels map[string]string) (fit map[string]string, cut bool) {
	if CheckLabels(labels) == nil {
		return labels, false
	}
	fit = map[string]string{}
	total := 0
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		v := labels[k]
		if CheckLabel(k, v) != nil || len(fit) == MaxLabels || total+len(k)+len(v) > MaxLabelsBytes {
			continue
		}
		fit[k] = v
		total += len(k) + len(v)
	}
	if len(fit) == 0 {
		fit = nil
	}
	return fit, true
}

// printable: valid UTF-8 without control characters.
func printable(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if unicode.IsControl(r) {
			return false
		}
	}
	return true
}

// quoteCut quotes s for an error, cut to a readable length.
func quoteCut(s string) string {
	if len(s) > 40 {
		// Cut on a rune boundary, so that the quote shows text, not bytes.
		n := 40
		for n > 0 && !utf8.RuneStart(s[n]) {
			n--
		}
		return fmt.Sprintf("%q...", s[:n])
	}
	return fmt.Sprintf("%q", s)
}
