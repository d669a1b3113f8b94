"""The diagnostic codes as named constants: a use site says which problem, the catalogue
(router/diagnostics/codes.py) says what it means. Kept small so the sidecar's start path can
import it (the catalogue is not imported there). tests/diagnostics/test_codes.py checks that the two agree.
"""

from __future__ import annotations

FILE_UNREADABLE = "RT100"  # file cannot be read
INVALID_YAML = "RT101"  # invalid YAML
DUPLICATE_KEY = "RT102"  # duplicate key
TOO_LARGE = "RT103"  # file or policy too large
FILE_REFUSED = "RT104"  # file refused: a link out of its project, or a kernel file
UNKNOWN_KEY = "RT110"  # unknown key
INVALID_VALUE = "RT111"  # invalid value
MISSING_KEY = "RT112"  # missing required key
UNSUPPORTED_VERSION = "RT113"  # unsupported version
USE_NOT_FOUND = "RT120"  # `use:` target not found
USE_CYCLE = "RT121"  # `use:` cycle
UNKNOWN_OVERRIDE_ID = "RT122"  # unknown rule id in an override
SKILLS_PATH_NOT_FOUND = "RT123"  # `provides.skills:` path not found
USER_ONLY_VAR = "RT124"  # var only the user may set
GIT_SOURCE_UNAVAILABLE = "RT125"  # git source not available
GIT_SOURCE_MISMATCH = "RT126"  # cached git source does not match the lock
INVALID_EVENT_DOCUMENT = "RT130"  # invalid event document
INVALID_EVENT_FIELD = "RT131"  # invalid event field
INVALID_JMESPATH = "RT201"  # invalid JMESPath
INVALID_EXPRESSION = "RT202"  # invalid expression
FORBIDDEN_CONSTRUCT = "RT203"  # forbidden construct in an expression
INVALID_TEMPLATE = "RT204"  # invalid template
UNKNOWN_EVENT_TYPE = "RT205"  # unknown event type
UNKNOWN_ACTION = "RT206"  # unknown action
INVALID_ACTION_PARAMS = "RT207"  # invalid action parameters
UNKNOWN_FUNCTION = "RT208"  # unknown function
WRONG_ARGUMENT_COUNT = "RT209"  # wrong number of arguments
REGEX_DOES_NOT_COMPILE = "RT210"  # regex does not compile
UNKNOWN_EVENT_FIELD = "RT301"  # unknown event field
UNKNOWN_NAME = "RT302"  # unknown name in an expression
UNDEFINED_VAR = "RT303"  # undefined var
UNDEFINED_SIGNAL = "RT304"  # undefined signal
DUPLICATE_RULE_ID = "RT305"  # duplicate rule id
RULE_NEVER_FIRES = "RT306"  # rule can never fire
REGEX_MAY_BACKTRACK = "RT307"  # regex may backtrack catastrophically
INLINE_EXAMPLE_FAILS = "RT308"  # inline example fails
ACTION_WITHOUT_EFFECT = "RT309"  # action has no effect on the rule's events
SIGNAL_CYCLE = "RT310"  # signal cycle
UNUSED_VAR_OR_SIGNAL = "RT311"  # unused var or signal
STATE_KEY_NEVER_WRITTEN = "RT312"  # state key never written
UNDECLARED_ENV_VAR = "RT313"  # undeclared environment variable
SHADOW_RULE_WRITES_STATE = "RT314"  # shadow rule writes state
PATTERN_FROM_DATA = "RT315"  # regex pattern from evaluation data
USER_ONLY_VAR_SWITCHED_ON = "RT316"  # a user-only var is switched on
OBJECT_COMPARED_WITH_TEXT = "RT317"  # an event object compared with a text
EMPTY_POLICY_FILE = "RT318"  # a policy file that sets nothing
BAD_LET_BINDING = "RT330"  # bad `let:` binding or template loop name
UNUSED_LET_BINDING = "RT331"  # unused `let:` binding
EXPRESSION_TOO_LONG = "RT332"  # expression too long to read
INVALID_COMMAND_SHORTHAND = "RT333"  # invalid `command:` shorthand
UNDECLARED_COMMAND = "RT334"  # `command:` names an undeclared command
KEY_MOVED_UNDER_PROVIDES = "RT335"  # key moved under `provides:`
EVALUATION_ERROR = "RT401"  # evaluation error
HELPER_FAILED = "RT402"  # helper function failed
EVALUATION_LIMIT = "RT403"  # evaluation limit reached
BUDGET_EXCEEDED = "RT404"  # evaluation budget exceeded
ACTION_FAILED = "RT501"  # action failed
SIGNAL_FAILED = "RT502"  # signal failed
RELOAD_FAILED = "RT503"  # policy reload failed
WRITES_OUTSIDE_PROJECT = "RT601"  # project policy writes outside its project
READS_OUTSIDE_PROJECT = "RT602"  # project policy reads outside its project
ENV_VAR_NOT_GRANTED = "RT603"  # project policy reads an environment variable you did not grant
CHOOSES_CHILD_PROGRAM = "RT604"  # project policy chooses the child's program
FILE_OUTSIDE_PROJECT = "RT605"  # project policy uses a file outside its project
USER_ONLY_SETTING = "RT606"  # `project_env` or `decision_log` outside your own file
SYMLINK_REFUSED = "RT607"  # file is a symbolic link
PROJECT_ANSWERS_TRUST = "RT608"  # project policy answers Pi's project-trust prompt
LOCKED_RULE_CHANGED = "RT609"  # lower layer changes a locked managed rule
FAILURE_POLICY_OPENED = "RT620"  # failure policy opened where it may not be
