#!/usr/bin/env python3
"""Writes cases.json: conversations (system/user/assistant, tool calls and results, thinking on
and off, reasoning in history) rendered with the Qwen3 chat template, plus small templates for
the filters, tests and methods chat templates use.  python3 make_cases.py > cases.json"""
import json
import os

here = os.path.dirname(os.path.abspath(__file__))
qwen3 = open(os.path.join(here, "..", "..", "..", "train", "llm", "qwen3_chat_template.jinja")).read()

tools = [
    {"type": "function", "function": {"name": "get_time", "description": "Current time in a zone",
                                      "parameters": {"type": "object", "properties": {"zone": {"type": "string", "description": "IANA zone, e.g. \"Europe/Paris\""}},
                                                     "required": ["zone"]}}},
    {"type": "function", "function": {"name": "set_timer", "description": "Start a timer <ü & 中>",
                                      "parameters": {"type": "object", "properties": {"seconds": {"type": "integer", "minimum": 1, "maximum": 86400.5}}}}},
]
sys_msg = {"role": "system", "content": "You are Parley, a friendly private voice assistant."}
convs = [
    [{"role": "user", "content": "Hello!"}],
    [sys_msg, {"role": "user", "content": "What time is it in Paris?"}],
    [sys_msg, {"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello! How can I help?"},
     {"role": "user", "content": "Tell me a joke.\nA short one."}],
    [sys_msg, {"role": "user", "content": "Think first: 2+2?"},
     {"role": "assistant", "content": "<think>\nTwo plus two.\n</think>\n\nFour."}, {"role": "user", "content": "And 3+3?"}],
    [sys_msg, {"role": "user", "content": "Time in Tokyo?"},
     {"role": "assistant", "content": "", "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "get_time", "arguments": {"zone": "Asia/Tokyo"}}}]},
     {"role": "tool", "tool_call_id": "call_1", "content": "{\"time\": \"09:30\"}"}],
    [sys_msg, {"role": "user", "content": "Two timers please"},
     {"role": "assistant", "content": "Sure.", "tool_calls": [
         {"type": "function", "function": {"name": "set_timer", "arguments": "{\"seconds\": 60}"}},
         {"type": "function", "function": {"name": "set_timer", "arguments": {"seconds": 120}}}]},
     {"role": "tool", "content": "ok 1"}, {"role": "tool", "content": "ok 2"},
     {"role": "assistant", "content": "Both are running."}, {"role": "user", "content": "Thanks 😀"}],
    [{"role": "user", "content": "<tool_response>\nx\n</tool_response>"}, {"role": "assistant", "content": "y", "reasoning_content": "because"}],
    [{"role": "user", "content": "中文问题：今天天气怎么样？"}, {"role": "assistant", "content": "<think>\n想一想\n</think>\n\n晴天。"}],
]
cases = []
for conv in convs:
    for opts in ({"add_generation_prompt": True}, {"add_generation_prompt": True, "enable_thinking": False},
                 {"add_generation_prompt": True, "tools": tools}, {"add_generation_prompt": False}):
        cases.append({"template": qwen3, "vars": {"messages": conv, **opts}})

small = [
    ("{{ x | tojson }}", {"x": {"b": 1, "a": [1, 2.5, None, True, "q\"<>&\n\u00e9"], "c": {}}}),
    ("{{ x | tojson(indent=2) }}", {"x": {"b": 1, "a": [1, {"z": []}]}}),
    ("{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}", {"d": {"z": 1, "a": "x"}}),
    ("{{ s.strip() }}|{{ s.lstrip() }}|{{ s.rstrip('\\n ') }}|{{ s | trim }}|{{ s.split()|length }}", {"s": "  a b \n"}),
    ("{{ s.upper() }} {{ s.title() }} {{ s.replace('a', 'o') }} {{ s[1:3] }} {{ s[::-1] }} {{ s[-1] }}", {"s": "banana split"}),
    ("{% set ns = namespace(n=0) %}{% for i in range(5) %}{% if i is odd %}{% set ns.n = ns.n + i %}{% endif %}{% endfor %}{{ ns.n }}", {}),
    ("{% for m in ms if m.role != 'system' %}{{ loop.index }}/{{ loop.length }}:{{ m.role }}{% if not loop.last %},{% endif %}{% else %}none{% endfor %}", {"ms": [{"role": "system"}, {"role": "user"}, {"role": "assistant"}]}),
    ("{{ 'yes' if x is defined and x is not none else 'no' }} {{ y | default('d') }} {{ 7 // 2 }} {{ 7 % 3 }} {{ 7 / 2 }} {{ 'a' ~ 1 }}", {"x": None}),
    ("{%- if a -%}\n  A\n{%- elif b %}\n  B\n{% else %}C{% endif -%}\n!", {"b": True}),
    ("  {% if true %}\nline\n  {% endif %}\nend\n", {}),
    ("{{ [1,2,3] | join('-') }} {{ ['x'] + ['y'] }} {{ 'b' in 'abc' }} {{ 2 not in [1,3] }} {{ {'k': 1}.get('k') }}", {}),
    ("{{ raise_exception('bad role: ' + r) }}", {"r": "robot"}),
    ("{{ n }}|{{ u }}|{{ 1.0 }}|{{ 2.5 }}|{{ [1, none] }}|{{ {'a': true} }}|{{ t }}", {"n": None, "t": False}),
    ("{{ messages[0]['content'] | trim }}{{ bos_token }}", {"messages": [{"content": "  hi  "}], "bos_token": "<s>"}),
]
for t, v in small:
    cases.append({"template": t, "vars": v})
print(json.dumps(cases, ensure_ascii=False, indent=1))
