log("auditing", ctx.event.data.order_id);
return {audited: ctx.event.data.order_id};
