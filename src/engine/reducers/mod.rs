//! The pipeline's reducers, cheap to expensive, and the layout.
//!
//! Each works on the events of the context it makes at this call
//! (`Context::unsettled`): everything from scratch, or, in the incremental
//! path, what may have changed since the call before (see `engine::Projector`).

mod layout;
mod summary;
mod tool_results;
mod window;

pub use layout::{Laid, layout};
pub use summary::{
    Cover, SummaryReducer, applicable, apply_cover, extend_removable, placeholder_text,
    removable_by,
};
pub use tool_results::{Runs, ToolResults};
pub use window::{Bounds, Window};
