package llm

import (
	"encoding/json"
	"net/url"
	"regexp"
	"sort"
	"strings"
)

// Redacted replaces a secret in the text that Redact returns.
const Redacted = "[REDACTED]"

// MinSecretLen is the shortest secret that Redact replaces where it appears by
// itself: a shorter one (a local server's "x") would blank ordinary words.
// Credential shapes are replaced whatever their length.
const MinSecretLen = 8

var (
	// credentialField is a header, JSON field or query parameter that carries
	// a credential, followed by its value: "Authorization: Bearer x",
	// `"authorization":"Bearer x"`, `\"x-api-key\":\"x\"`, "api_key=x",
	// "map[X-Api-Key:[x]]", "?key=x". Groups: 1 the name, 2 the separator (and the
	// scheme, if any), 3 the value. The value stops at a quote, bracket,
	// separator or space, so that what follows it is kept.
	credentialField = regexp.MustCompile(`(?i)((?:proxy-)?authorization|x-goog-api-key|(?:x-)?api[-_]?key|access[-_]token|auth[-_]token|client[-_]secret|[?&](?:key|token))` +
		`([\\"'\s]*[:=][\\"'\s\[]*(?:(?:bearer|basic|token|digest)\s+)?)` +
		`([^\s\\"',;&\[\]{}()<>]+)`)
	// keyShape is a token shaped like an OpenAI or Anthropic API key
	// (sk-..., sk-proj-..., sk-ant-api03-...), wherever it appears.
	keyShape = regexp.MustCompile(`\bsk-[A-Za-z0-9_\-]{12,}`)
	// schemes are the words that may stand where a value is expected: in
	// "Authorization: Bearer" alone, "Bearer" is no secret.
	schemes = map[string]bool{"bearer": true, "basic": true, "token": true, "digest": true}
)

// Redact returns s with its secrets replaced by Redacted, so that it may be
// recorded, printed or logged: each of secrets (of MinSecretLen bytes or more)
// wherever it appears, also JSON- or URL-escaped; the value of every header,
// JSON field or query parameter that carries a credential (Authorization,
// Proxy-Authorization, x-api-key, api-key, api_key, apikey, access_token, a
// query's key and token, ...), in the shapes of a header line, JSON (also escaped inside a JSON
// string) and a query string; and every token shaped like an OpenAI or
// Anthropic key (sk-...). Redacting twice changes nothing more.
//
// Providers redact every error they return (see RedactError); the session
// redacts again what it records of a failed call, as defence in depth.
func Redact(s string, secrets ...string) string {
	for _, v := range secretForms(secrets) {
		s = strings.ReplaceAll(s, v, Redacted)
	}
	s = redactFields(s)
	return keyShape.ReplaceAllString(s, Redacted)
}

// secretForms are the secrets of MinSecretLen bytes or more, as they are and
// escaped as JSON and as a URL would carry them, longest first (so that a
// secret that holds another is replaced whole).
func secretForms(secrets []string) []string {
	var forms []string
	seen := map[string]bool{}
	add := func(v string) {
		if len(v) >= MinSecretLen && !seen[v] {
			seen[v] = true
			forms = append(forms, v)
		}
	}
	for _, v := range secrets {
		add(v)
		if b, err := json.Marshal(v); err == nil {
			add(string(b[1 : len(b)-1]))
		}
		add(url.QueryEscape(v))
		add(url.PathEscape(v))
	}
	sort.SliceStable(forms, func(i, j int) bool { return len(forms[i]) > len(forms[j]) })
	return forms
}

// redactFields replaces the values of credentialField, leaving a value that
// is already Redacted, or a lone scheme word, as it is.
func redactFields(s string) string {
	matches := credentialField.FindAllStringSubmatchIndex(s, -1)
	if matches == nil {
		return s
	}
	var b strings.Builder
	last := 0
	for _, m := range matches {
		vs, ve := m[6], m[7]
		v := s[vs:ve]
		if schemes[strings.ToLower(v)] || (v == strings.Trim(Redacted, "[]") && vs > 0 && s[vs-1] == '[' && ve < len(s) && s[ve] == ']') {
			continue
		}
		b.WriteString(s[last:vs])
		b.WriteString(Redacted)
		last = ve
	}
	b.WriteString(s[last:])
	return b.String()
}

// RedactError returns err with the text of its message redacted (Redact with
// secrets), its class kept: a *ProviderError is copied with its Message
// redacted (Provider, Status and Err as they were, so errors.Is and
// errors.As see the same sentinels); any other error whose text holds a
// secret is wrapped in one that prints the redacted text and unwraps to err.
// nil stays nil.
func RedactError(err error, secrets ...string) error {
	if err == nil {
		return nil
	}
	if pe, ok := err.(*ProviderError); ok {
		cp := *pe
		cp.Message = Redact(pe.Message, secrets...)
		return &cp
	}
	text := err.Error()
	if red := Redact(text, secrets...); red != text {
		return &redactedError{text: red, err: err}
	}
	return err
}

// redactedError prints the redacted text of err and unwraps to it.
type redactedError struct {
	text string
	err  error
}

func (e *redactedError) Error() string { return e.text }
func (e *redactedError) Unwrap() error { return e.err }
