// Package jsonx appends the JSON of values that TAH writes on its hot paths
// (a record's header, a token delta) without encoding/json's reflection,
// as json.Marshal would write them.
//
// Go 1.27's encoding/json/jsontext.AppendQuote does the same for any string,
// but the module still builds with Go 1.26 (go.mod), where jsontext sits
// behind GOEXPERIMENT=jsonv2.
package jsonx

import (
	"encoding/json"
	"unicode/utf8"
)

// AppendString appends s as json.Marshal writes it: as it is between quotes
// when it holds only printable ASCII that Marshal does not escape (ids,
// event types, most of a model's tokens), else as Marshal writes it.
func AppendString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= utf8.RuneSelf || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(s) // a string always encodes
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}
