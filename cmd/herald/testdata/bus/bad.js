log("order", ctx.event.data.order_id;
return {ok: true};
