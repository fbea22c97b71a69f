//! Compactions that did harm: `compaction_loop`, `compaction_grew` and
//! `cache_break`.

use super::{Finder, Finding, Scope};
use crate::analysis::ProjectionCache;
use crate::analysis::replay::CallReplay;
use crate::engine::Projected;
use crate::model::SessionLog;

pub(super) struct Compactions {}

impl Compactions {
    pub(super) fn new(_session: &SessionLog) -> Compactions {
        Compactions {}
    }
}

impl<'a> Finder<'a> for Compactions {
    fn visit(&mut self, _replayed: &CallReplay, _projected: Option<&Projected<'a>>) {}

    fn found(self: Box<Self>, _scope: &Scope<'a>, _cache: &mut ProjectionCache) -> Vec<Finding> {
        Vec::new()
    }
}
