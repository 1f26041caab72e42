package event

import (
	"encoding"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/tah-dev/tah/internal/jsonx"
)

// Typed is Decode for an event whose writer still holds its payload: p, the
// value New made e of (a payload struct or a pointer to one). When decoding
// e.Data would give p back exactly (its strings valid UTF-8, its raw JSON as
// Marshal writes it, no empty slice or map that the encoding leaves out, no
// time but the zero one: roundTrips), it returns a pointer to a copy of p,
// checked as Decode checks a payload, without decoding anything; otherwise it
// returns e.Decode(). Either way the result is what Decode returns, so that
// a writer's fold of its own events (projection.ApplyTyped) is the fold of
// its log. The copy shares p's slices, maps and pointers: p must not change
// afterwards. A session's owner decoded every event it had just encoded,
// which was most of its fold's cost.
func (e Event) Typed(p any) (any, error) {
	out, ok := e.typedFast(p)
	if !ok {
		st, ok := payloadStructs[e.Type]
		if !ok || p == nil {
			return e.Decode()
		}
		v := reflect.ValueOf(p)
		switch {
		case v.Kind() == reflect.Pointer && v.Type().Elem() == st && !v.IsNil():
			v = v.Elem()
		case v.Type() != st:
			return e.Decode()
		}
		if !roundTrips(v, false) {
			return e.Decode()
		}
		cp := reflect.New(st)
		cp.Elem().Set(v)
		out = cp.Interface()
	}
	if val, ok := out.(validator); ok {
		if err := val.validate(); err != nil {
			return nil, fmt.Errorf("event %d %q: %w: %v", e.Seq, e.Type, ErrMalformed, err)
		}
	}
	return out, nil
}

// payloadStructs are the payload types of the known event types, by type.
var payloadStructs = func() map[Type]reflect.Type {
	m := make(map[Type]reflect.Type, len(payloads))
	for t, mk := range payloads {
		m[t] = reflect.TypeOf(mk()).Elem()
	}
	return m
}()

var (
	rawMessageType = reflect.TypeFor[json.RawMessage]()
	timeType       = reflect.TypeFor[time.Time]()
	stringType     = reflect.TypeFor[string]()
	isZeroerType   = reflect.TypeFor[interface{ IsZero() bool }]()
	marshalerTypes = []reflect.Type{reflect.TypeFor[json.Marshaler](), reflect.TypeFor[json.Unmarshaler](),
		reflect.TypeFor[encoding.TextMarshaler](), reflect.TypeFor[encoding.TextUnmarshaler]()}
)

// roundTrips reports whether encoding v with encoding/json and decoding the
// result into a new value of its type gives a value reflect.DeepEqual to v.
// It is sure of it, not exhaustive: a value of a kind or type it does not
// follow (an interface, a type with its own (un)marshaling, a struct whose
// JSON names collide) is reported false. omitEmpty is the omitempty of the
// field v is (an empty slice, map or raw value is then left out, and
// decodes as nil).
func roundTrips(v reflect.Value, omitEmpty bool) bool {
	t := v.Type()
	switch t {
	case rawMessageType:
		if v.Len() == 0 {
			// Nil and left out decodes as nil; nil not left out is "null",
			// which decodes as the raw bytes null.
			return v.IsNil() && omitEmpty
		}
		return jsonx.MarshalForm(v.Bytes())
	case timeType:
		// The zero time comes back the zero time; another loses its
		// monotonic reading and perhaps its zone.
		return v.Interface().(time.Time).IsZero()
	}
	switch v.Kind() {
	case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return true
	case reflect.Float32, reflect.Float64:
		f := v.Float()
		return !math.IsNaN(f) && !math.IsInf(f, 0)
	case reflect.String:
		return utf8.ValidString(v.String())
	case reflect.Pointer:
		return v.IsNil() || roundTrips(v.Elem(), false)
	case reflect.Slice:
		switch {
		case v.IsNil():
			return true
		case t.Elem().Kind() == reflect.Uint8:
			return false // base64: an empty one decodes as empty, not nil
		case v.Len() == 0:
			return !omitEmpty
		}
		fallthrough
	case reflect.Array:
		for i := range v.Len() {
			if !roundTrips(v.Index(i), false) {
				return false
			}
		}
		return true
	case reflect.Map:
		switch {
		case v.IsNil():
			return true
		case t.Key() != stringType:
			return false
		case v.Len() == 0:
			return !omitEmpty
		}
		for it := v.MapRange(); it.Next(); {
			if !utf8.ValidString(it.Key().String()) || !roundTrips(it.Value(), false) {
				return false
			}
		}
		return true
	case reflect.Struct:
		plan := planOf(t)
		if plan == nil {
			return false
		}
		for _, f := range plan {
			fv := v.FieldByIndex(f.index)
			switch {
			case f.skip:
				if !fv.IsZero() {
					return false // not encoded: decodes as zero
				}
			case f.omitZero && fv.IsZero():
			case !roundTrips(fv, f.omitEmpty):
				return false
			}
		}
		return true
	}
	return false
}

// fieldPlan is how encoding/json treats one field of a struct: encoded with
// its omitempty and omitzero, or not encoded at all (skip).
type fieldPlan struct {
	index               []int
	omitEmpty, omitZero bool
	skip                bool
}

var plans sync.Map // reflect.Type → []fieldPlan, nil when roundTrips does not follow the type

// planOf is t's fields as encoding/json treats them, embedded structs'
// fields inlined; nil for a type roundTrips does not follow: one with its own
// (un)marshaling, a field with the string option, an embedded pointer, an
// omitzero of a type with its own IsZero, or two fields of one JSON name
// without regard to case (encoding/json then drops one, or decodes into the
// other).
func planOf(t reflect.Type) []fieldPlan {
	if p, ok := plans.Load(t); ok {
		return p.([]fieldPlan)
	}
	p, names := []fieldPlan{}, map[string]bool{}
	if !planFields(t, nil, &p, names) {
		p = nil
	}
	plans.Store(t, p)
	return p
}

func planFields(t reflect.Type, at []int, p *[]fieldPlan, names map[string]bool) bool {
	if ownEncoding(t) {
		return false
	}
	for i := range t.NumField() {
		f := t.Field(i)
		index := append(append([]int(nil), at...), i)
		tag, hasTag := f.Tag.Lookup("json")
		name, opts, _ := strings.Cut(tag, ",")
		switch {
		case tag == "-":
			*p = append(*p, fieldPlan{index: index, skip: true})
			continue
		case f.Anonymous && name == "":
			if f.Type.Kind() != reflect.Struct {
				if !f.IsExported() {
					*p = append(*p, fieldPlan{index: index, skip: true})
					continue
				}
				return false // an embedded pointer or named non-struct
			}
			if !planFields(f.Type, index, p, names) {
				return false
			}
			continue
		case !f.IsExported():
			*p = append(*p, fieldPlan{index: index, skip: true})
			continue
		}
		if !hasTag || name == "" {
			name = f.Name
		}
		key := strings.ToLower(name) // decoding matches names without case
		if names[key] {
			return false
		}
		names[key] = true
		if !followed(f.Type) {
			return false
		}
		fp := fieldPlan{index: index}
		for o := range strings.SplitSeq(opts, ",") {
			switch o {
			case "omitempty":
				fp.omitEmpty = true
			case "omitzero":
				// A type's own IsZero decides what omitzero leaves out;
				// roundTrips knows only the time's.
				if f.Type != timeType && (f.Type.Implements(isZeroerType) || reflect.PointerTo(f.Type).Implements(isZeroerType)) {
					return false
				}
				fp.omitZero = true
			case "string", "inline", "unknown", "format":
				return false
			}
		}
		*p = append(*p, fp)
	}
	return true
}

// ownEncoding reports whether t (or *t) has its own JSON or text encoding
// or decoding.
func ownEncoding(t reflect.Type) bool {
	for _, m := range marshalerTypes {
		if t.Implements(m) || reflect.PointerTo(t).Implements(m) {
			return true
		}
	}
	return false
}

// followed reports whether roundTrips follows a field of type t: neither
// t nor what it points to or holds has its own encoding (but raw JSON and
// times), and none is an interface. Structs are checked by their own plan.
func followed(t reflect.Type) bool {
	for {
		switch {
		case t == rawMessageType || t == timeType:
			return true
		case ownEncoding(t) || t.Kind() == reflect.Interface:
			return false
		}
		switch t.Kind() {
		case reflect.Pointer, reflect.Slice, reflect.Array, reflect.Map:
			t = t.Elem()
		default:
			return true
		}
	}
}
