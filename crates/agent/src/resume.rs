//! Continuing a run that another server began (docs/runs.md, "Takeover").
//! While it runs, the loop reports where it stands at each step as a
//! [`Checkpoint`] (the model is asked for step N; step N answered with these
//! calls). Another server that takes the run over hands back those
//! checkpoints with the results its events recorded as a [`Resume`]; the
//! loop rebuilds the conversation from them without asking the model or
//! running a tool again, settles the calls that were cut off, and goes on.

use std::collections::{HashMap, HashSet};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::Usage;
use crate::agent::PlannedCall;

/// Where a run stands, recorded so that another server can continue it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "at", rename_all = "snake_case")]
pub enum Checkpoint {
    /// The model is asked for step `step` now: what the run reports after
    /// this, until the step's calls are planned, is that step's answer.
    Asking {
        step: u32,
        /// The step asks again after an empty answer (asked once only).
        #[serde(default)]
        asked_again: bool,
    },
    /// Step `step` answered with calls, which run next.
    Planned(PlannedStep),
    /// These calls of step `step` start now (written before any of them
    /// can have an effect): a call not named in one never started.
    Running { step: u32, calls: Vec<String> },
}

/// A step whose answer called tools: what the model wrote and called, as
/// the conversation will carry it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlannedStep {
    pub step: u32,
    /// The visible text of the answer.
    pub text: String,
    /// The answer as the model reads it back in tags mode.
    pub transcript: String,
    pub calls: Vec<StepCall>,
    /// Calls that could not be read: what was written, and why.
    pub malformed: Vec<(String, String)>,
    /// Tokens used by the run up to and including this step.
    pub usage: Usage,
    #[serde(default)]
    pub asked_again: bool,
}

/// One call of a planned step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepCall {
    pub id: String,
    pub name: String,
    pub raw_arguments: String,
    /// The parsed arguments; `None` when they could not be read (`invalid`
    /// says why).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arguments: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub invalid: Option<String>,
    /// How the model wrote it as text; `None` for a native call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub written: Option<String>,
}

impl From<&PlannedCall> for StepCall {
    fn from(call: &PlannedCall) -> Self {
        StepCall {
            id: call.id.clone(),
            name: call.name.clone(),
            raw_arguments: call.raw_arguments.clone(),
            arguments: call.arguments.as_ref().ok().cloned(),
            invalid: call.arguments.as_ref().err().cloned(),
            written: call.written.clone(),
        }
    }
}

impl From<&StepCall> for PlannedCall {
    fn from(call: &StepCall) -> Self {
        PlannedCall {
            id: call.id.clone(),
            name: call.name.clone(),
            raw_arguments: call.raw_arguments.clone(),
            arguments: match (&call.arguments, &call.invalid) {
                (Some(args), _) => Ok(args.clone()),
                (None, Some(why)) => Err(why.clone()),
                (None, None) => Err("the arguments were not recorded".into()),
            },
            written: call.written.clone(),
        }
    }
}

/// What a run recorded before its server stopped: its checkpoints, in
/// order, and what its calls did.
#[derive(Debug, Clone, Default)]
pub struct Resume {
    pub checkpoints: Vec<Checkpoint>,
    /// The results recorded, by call id (the run's own calls, not a
    /// sub-agent's).
    pub results: HashMap<String, data_plane_registry::ToolResult>,
    /// Calls whose start was recorded (their complete `tool_call`).
    pub started: HashSet<String>,
    /// Calls known not to have reached their tool: they waited for a
    /// person's approval, or were refused one. Such a call may run again
    /// whatever its annotations say.
    pub not_run: HashSet<String>,
}

/// How a run goes on after a takeover, decided before it does
/// ([`crate::Agent::resume_plan`]).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ResumePlan {
    /// The step whose model request is made (again): what the run reported
    /// of it before is dropped.
    pub step: u32,
    /// Whether the model had been asked for that step already (its partial
    /// answer was recorded and is dropped).
    pub asked_before: bool,
    /// That step was itself the one more request after an empty answer.
    pub asked_again: bool,
    /// Calls that had begun and run again (idempotent, or never reached
    /// their tool): what a reader holds of them besides their start is
    /// dropped; their events follow.
    pub rerun: Vec<String>,
    /// Calls that had begun and are not run again, since they may have had
    /// an effect: each ends with an `interrupted` failure the model reads.
    pub interrupted: Vec<String>,
}

impl Resume {
    /// The planned steps, in order (a step planned twice, by a run taken
    /// over more than once, counts once: the later record).
    pub(crate) fn planned(&self) -> Vec<&PlannedStep> {
        let mut steps: Vec<&PlannedStep> = Vec::new();
        for checkpoint in &self.checkpoints {
            if let Checkpoint::Planned(step) = checkpoint {
                steps.retain(|s| s.step < step.step);
                steps.push(step);
            }
        }
        steps
    }

    /// The model request that was under way when the run stopped: the
    /// last `Asking` not followed by its step's plan.
    pub(crate) fn asking(&self) -> Option<(u32, bool)> {
        let mut asking = None;
        for checkpoint in &self.checkpoints {
            match checkpoint {
                Checkpoint::Asking { step, asked_again } => asking = Some((*step, *asked_again)),
                Checkpoint::Planned(planned) => {
                    if asking.is_some_and(|(s, _)| s <= planned.step) {
                        asking = None;
                    }
                }
                Checkpoint::Running { .. } => {}
            }
        }
        asking
    }

    /// Calls of step `step` that started (a `Running` checkpoint names
    /// them), whether or not their start event was recorded.
    pub(crate) fn began(&self, step: u32) -> HashSet<&str> {
        self.checkpoints
            .iter()
            .filter_map(|c| match c {
                Checkpoint::Running { step: s, calls } if *s == step => Some(calls),
                _ => None,
            })
            .flatten()
            .map(String::as_str)
            .collect()
    }
}

/// The failure of a call cut off by its server's end and not run again.
pub(crate) fn interrupted_error(tool: &str) -> data_plane_registry::ToolError {
    data_plane_registry::ToolError::new(
        data_plane_registry::ErrorCode::Interrupted,
        format!(
            "{tool} was interrupted when the server running it stopped; it was not run again \
             because it may already have had an effect: check before calling it again"
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn planned(step: u32) -> Checkpoint {
        Checkpoint::Planned(PlannedStep {
            step,
            text: String::new(),
            transcript: String::new(),
            calls: vec![],
            malformed: vec![],
            usage: Usage::default(),
            asked_again: false,
        })
    }

    fn asking(step: u32) -> Checkpoint {
        Checkpoint::Asking {
            step,
            asked_again: false,
        }
    }

    #[test]
    fn the_request_under_way_is_the_last_asking_without_its_plan() {
        let resume = |checkpoints| Resume {
            checkpoints,
            ..Resume::default()
        };
        assert_eq!(resume(vec![]).asking(), None);
        assert_eq!(resume(vec![asking(1)]).asking(), Some((1, false)));
        assert_eq!(resume(vec![asking(1), planned(1)]).asking(), None);
        assert_eq!(
            resume(vec![asking(1), planned(1), asking(2)]).asking(),
            Some((2, false))
        );
        // Taken over twice: step 2 asked, planned again by the second server.
        let twice = resume(vec![
            asking(1),
            planned(1),
            asking(2),
            asking(2),
            planned(2),
        ]);
        assert_eq!(twice.asking(), None);
        assert_eq!(
            twice.planned().iter().map(|s| s.step).collect::<Vec<_>>(),
            vec![1, 2]
        );
    }

    #[test]
    fn checkpoints_read_back_as_they_were_written() {
        let step = Checkpoint::Planned(PlannedStep {
            step: 3,
            text: "Let me look.".into(),
            transcript: "Let me look.\nSEARCH: vacuum".into(),
            calls: vec![StepCall {
                id: "call_1".into(),
                name: "search".into(),
                raw_arguments: "{\"query\":\"vacuum\"}".into(),
                arguments: Some(serde_json::json!({"query": "vacuum"})),
                invalid: None,
                written: Some("SEARCH: vacuum".into()),
            }],
            malformed: vec![("<tool_call>{".into(), "not JSON".into())],
            usage: Usage {
                prompt_tokens: 10,
                completion_tokens: 5,
            },
            asked_again: false,
        });
        let json = serde_json::to_value(&step).unwrap();
        assert_eq!(json["at"], "planned");
        assert_eq!(serde_json::from_value::<Checkpoint>(json).unwrap(), step);
        let asking = serde_json::to_value(asking(4)).unwrap();
        assert_eq!(
            asking,
            serde_json::json!({"at": "asking", "step": 4, "asked_again": false})
        );
    }
}
